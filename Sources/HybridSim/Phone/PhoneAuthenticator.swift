import CTAP2
import Foundation
import HybridCore
import HybridRuntime

/// The phone's authenticator for one transaction: a ``SoftwareAuthenticator`` over the passkey
/// store, with the user's choices (`--deny`, `--account`, the terminal prompt) and persistence.
///
/// A passkey that was created or used is saved before the response leaves the phone, as a real
/// authenticator commits before it answers; if saving fails the phone answers CTAP1_ERR_OTHER.
actor PhoneAuthenticator {
    private var store: PasskeyStore
    private var authenticator: SoftwareAuthenticator
    private let configuration: PhoneConfiguration
    private let narrator: PhoneNarrator

    /// What was done, once the request succeeded.
    private(set) var outcome: PhoneResult.Outcome?
    /// Why the request did not succeed (refused, store not saved).
    private(set) var failure: ProgramFailure?

    init(store: PasskeyStore, configuration: PhoneConfiguration, narrator: PhoneNarrator) {
        self.store = store
        self.authenticator = SoftwareAuthenticator(passkeys: store.passkeys)
        self.configuration = configuration
        self.narrator = narrator
    }

    /// The command byte of every request answered, in order.
    private(set) var commands: [UInt8] = []
    /// The RP ID of the account question asked and not answered (still open, or withdrawn by the
    /// driver); set before asking, so that ``explain(_:)`` sees it whenever the driver's error comes.
    private var unansweredQuestion: String?
    /// The answer was ready after the driver's deadline (not claimed): nothing was written.
    private var answeredLate = false

    /// Why the transaction failed, when the authenticator tells it better than the driver: a
    /// refusal or a failed save (``failure``), or the account question the driver withdrew, at
    /// the user's deadline (the phone answered CTAP2_ERR_USER_ACTION_TIMEOUT) or at the
    /// transaction's end (said here; the driver's error tells how it ended).
    func explain(_ error: TransactionError) -> ProgramFailure? {
        // The question left unanswered is the transaction's outcome, whatever an earlier,
        // preliminary command was refused for.
        if error.step == "answering the request", error.runtimeCode == .timeout {
            let limit = Self.decisionLimit(configuration.timeout).seconds
            if let rpId = unansweredQuestion {
                return ProgramFailure(
                    .timeout, "no account chosen for \(rpId) within \(limit); answered \(CTAP2StatusCode.userActionTimeout.name)")
            }
            if answeredLate {
                // The user's choice came, but after the deadline (a phone that did not run for a
                // while): the driver answered the timeout, and nothing was written.
                return ProgramFailure(
                    .timeout,
                    "the user's answer came after the \(limit) deadline; nothing was saved, and the phone answered "
                        + CTAP2StatusCode.userActionTimeout.name)
            }
        }
        if let failure { return failure }
        if unansweredQuestion != nil {
            narrator.say("the question is withdrawn: the transaction ended while the user was choosing")
        }
        return nil
    }

    /// Answers one request (command ‖ CBOR) with status ‖ CBOR.
    func respond(_ request: [UInt8], claim: @escaping @Sendable () -> Bool = { !Task.isCancelled }) async -> [UInt8] {
        commands.append(request.first ?? 0)
        var policy = configuration.policy
        let decoded = try? CTAP2Request(bytes: request)
        var command = "CTAP2"
        switch decoded {
        case .makeCredential(let request):
            command = "makeCredential"
            let user = request.user.name ?? Base64URL.encode(request.user.id)
            narrator.say("registration request from \(request.rp.id) for \(user)")
        case .getAssertion where configuration.deny:
            // The user refuses, whichever account it would have been: no choice to make, no prompt.
            command = "getAssertion"
        case .getAssertion(let request):
            command = "getAssertion"
            switch await chooseAccount(for: request) {
            case .none:
                break
            case .chosen(let passkey):
                policy.selectAccount = { candidates in candidates.first { $0.credentialID == passkey.credentialID } }
                narrator.say("signing in to \(request.rpId) as \(passkey.userName ?? Base64URL.encode(passkey.userID))")
            case .refuse(let failure):
                self.failure = failure
                return CTAP2Response.error(.operationDenied).encode()
            case .withdrawn:
                // The driver ended the wait (the desktop left or ended the transaction, or the
                // user's time ran out) and reports why (``explain(_:)``); nothing is signed or sent.
                return CTAP2Response.error(.operationDenied).encode()
            }
        default:
            break
        }

        guard let (response, outcome) = handleLocked(request, policy: policy, claim: claim) else {
            return CTAP2Response.error(.other).encode()
        }
        switch outcome {
        case .registered(let passkey):
            // The transaction's request succeeded: a refusal of an earlier, preliminary command
            // (an unknown one) is not the outcome.
            failure = nil
            self.outcome = .registered(passkey)
            let attestation =
                configuration.attestation == .none ? "" : " (\(configuration.attestation.rawValue) attestation)"
            narrator.say("registered a passkey for \(passkey.label)\(attestation), saved in \(store.path)")
        case .signedIn(let passkey):
            failure = nil
            self.outcome = .signedIn(passkey)
            narrator.say("signed the assertion for \(passkey.label) (signCount \(passkey.signCount))")
        case .refused(let status, let reason):
            failure = refusal(command: command, decoded: decoded, status: status, reason: reason)
            narrator.say("refused: \(reason) (answered \(status.name))")
        case .answered:
            break
        }
        return response
    }

    /// The account for a sign-in, when the choice matters.
    private enum Choice {
        /// Nothing to choose (no or one matching passkey, no `--account`).
        case none
        case chosen(Passkey)
        case refuse(ProgramFailure)
        /// The wait for the user was cancelled: the transaction is over.
        case withdrawn
    }

    /// How long the user has to decide (the driver's ``SessionTimeouts/userAction``), of the
    /// phone's `timeout`: a margin short (2 s, or a tenth of a shorter timeout), so that the
    /// phone's CTAP2_ERR_USER_ACTION_TIMEOUT reaches a desktop that waits the same `--timeout` for
    /// the answer before it gives up.
    static func decisionLimit(_ timeout: Duration) -> Duration {
        timeout - min(.seconds(2), timeout / 10)
    }

    /// Account names for a message: each name once, with its count when it repeats (`zoe ×3`), the
    /// first 10 and how many more: a store of many passkeys must not make one line of thousands.
    /// The names are a relying party's text: escaped (``PeerText/printable(_:limit:)``), so that one
    /// holding a line break or a terminal escape cannot forge a line or act on the terminal.
    static func accountList(_ names: [String]) -> String {
        var order: [String] = []
        var counts: [String: Int] = [:]
        for name in names {
            if counts[name] == nil { order.append(name) }
            counts[name, default: 0] += 1
        }
        let shown = order.prefix(10).map { name in
            let printable = PeerText.printable(name, limit: PeerText.lineLimit)
            return counts[name]! > 1 ? "\(printable) ×\(counts[name]!)" : printable
        }
        return shown.joined(separator: ", ") + (order.count > 10 ? ", and \(order.count - 10) more name(s)" : "")
    }

    /// The passkeys whose user name or display name is `account`. Swift compares strings
    /// canonically, so a name written in NFC and one in NFD (`é` as one scalar or as `e` and a
    /// combining accent) are equal; when both forms are on the phone, the one written exactly as
    /// `account` (same scalars) is chosen, and only without one does the other form count.
    static func named(_ account: String, among candidates: [Passkey]) -> [Passkey] {
        func exactly(_ name: String?) -> Bool { name.map { $0.unicodeScalars.elementsEqual(account.unicodeScalars) } ?? false }
        let exact = candidates.filter { exactly($0.userName) || exactly($0.userDisplayName) }
        return exact.isEmpty ? candidates.filter { $0.userName == account || $0.userDisplayName == account } : exact
    }

    private func chooseAccount(for request: GetAssertionRequest) async -> Choice {
        let allowed = Set((request.allowList ?? []).map(\.id))
        let candidates = authenticator.passkeys.filter { passkey in
            passkey.rpID == request.rpId && (allowed.isEmpty || allowed.contains(passkey.credentialID))
        }
        guard !candidates.isEmpty else { return .none }
        let names = Self.accountList(candidates.map { $0.userName ?? Base64URL.encode($0.userID) })
        if let account = configuration.account {
            let matching = Self.named(account, among: candidates)
            // The newest; of two made in the same second (the time is in seconds), the later in the
            // store, which is the order they were made in.
            let newest = matching.map(\.createdAt).max()
            guard let chosen = matching.last(where: { $0.createdAt == newest }) else {
                return .refuse(
                    ProgramFailure(
                        .refused,
                        "no passkey for account \(account) @ \(request.rpId) on this phone (accounts: \(names))"
                    )
                )
            }
            return .chosen(chosen)
        }
        guard candidates.count > 1 else { return .chosen(candidates[0]) }
        guard let chooser = configuration.chooseAccount else {
            return .refuse(
                ProgramFailure(
                    .refused,
                    "\(candidates.count) passkeys for \(request.rpId) match (\(names)); choose one with --account NAME (the newest of a name is used)"
                )
            )
        }
        // The driver bounds the question (``decisionLimit(_:)``): past it, it withdraws the
        // question and answers CTAP2_ERR_USER_ACTION_TIMEOUT.
        unansweredQuestion = request.rpId
        let outcome = await AccountQuestion.ask(chooser, rpId: request.rpId, accounts: candidates)
        if case .answered = outcome { unansweredQuestion = nil }
        switch outcome {
        case .answered(let chosen?) where candidates.contains(where: { $0.credentialID == chosen.credentialID }):
            return .chosen(chosen)
        case .answered:
            return .refuse(ProgramFailure(.refused, "no account chosen for \(request.rpId)"))
        case .withdrawn:
            return .withdrawn
        }
    }

    /// Answers `request` from the store as it is on disk now, under the store lock, and saves a
    /// created or used passkey before returning (`nil`: not saved, ``failure`` says why).
    ///
    /// Re-reading under the lock is what keeps two phones on one store consistent: each sees the
    /// other's passkeys and counters, so no passkey is lost and a counter is never handed out twice.
    /// The lock is held only while signing and writing (milliseconds), never while the user decides.
    /// A responder whose deadline passed (the driver cancelled it) writes nothing.
    private func handleLocked(
        _ request: [UInt8], policy: SoftwareAuthenticator.Policy, claim: @Sendable () -> Bool
    ) -> (response: [UInt8], outcome: SoftwareAuthenticator.Outcome)? {
        var authenticator = self.authenticator
        var store = self.store
        let now = UInt64(Date().timeIntervalSince1970)
        var late = false
        do {
            let handled = try store.update { passkeys in
                authenticator.passkeys = passkeys
                let handled = authenticator.handle(request, policy: policy, now: now)
                switch handled.outcome {
                case .registered, .signedIn:
                    // Claimed under the store lock, before the write: once granted, the answer
                    // is sent whatever the deadline does; refused, nothing is written.
                    guard claim() else {
                        late = true
                        return (handled, false)
                    }
                    passkeys = authenticator.passkeys
                    return (handled, true)
                case .answered, .refused:
                    return (handled, false)
                }
            }
            authenticator.passkeys = store.passkeys
            self.store = store
            self.authenticator = authenticator
            guard !late else {
                answeredLate = true
                failure = ProgramFailure(
                    .timeout, "the answer came after the user-action deadline; nothing was saved or sent")
                return nil
            }
            return handled
        } catch {
            failure = ProgramFailure(.failed, "cannot save the passkey store: \(error)\(error.advice)")
            return nil
        }
    }

    private func refusal(
        command: String,
        decoded: CTAP2Request?,
        status: CTAP2StatusCode,
        reason: String
    ) -> ProgramFailure {
        let rpId: String?
        switch decoded {
        case .makeCredential(let request): rpId = request.rp.id
        case .getAssertion(let request): rpId = request.rpId
        default: rpId = nil
        }
        switch status {
        case .noCredentials:
            let total = store.passkeys.count
            let forSite = rpId.map { id in store.passkeys.filter { $0.rpID == id }.count } ?? 0
            if case .getAssertion(let request) = decoded, let allowed = request.allowList, !allowed.isEmpty, forSite > 0 {
                return ProgramFailure(
                    .refused,
                    "none of this phone's \(forSite) passkey(s) for \(rpId ?? "that relying party") is among the \(allowed.count) credential(s) the relying party allows; answered \(status.name)"
                )
            }
            return ProgramFailure(
                .refused,
                "no passkey for \(rpId ?? "that relying party") on this phone (\(store.path) holds \(total) passkey(s)); "
                    + "answered \(status.name)"
            )
        case .operationDenied where configuration.deny:
            return ProgramFailure(
                .refused,
                "refused the \(command) request from \(rpId ?? "the desktop") (--deny): answered \(status.name)"
            )
        default:
            return ProgramFailure(.refused, "refused the \(command) request: \(reason); answered \(status.name)")
        }
    }
}
