import CTAP2
import Foundation
import HybridCore
import HybridRuntime
import Synchronization

/// `hybrid-sim phone --listen` and `hybrid-sim phone --unlink`: the linked phone (Docs/LINKING.md).
///
/// `--listen` keeps the push channel open on the relay (reconnecting with backoff) and answers each
/// contact request: it checks the client payload (known pairing ID, nonce never seen), derives the
/// link secret, joins the desktop's tunnel, advertises and answers `Noise_NKpsk0` and the request
/// like a QR session (`--account`, `--deny` apply). It exits 0 after `--count` answered requests.
public enum PhoneListenProgram {
    /// Settings of `--listen` beyond the phone's usual ones.
    public struct Configuration: Sendable {
        /// The phone's settings (relay, proximity, store, account, deny, json, per-transaction timeout).
        public var phone: PhoneConfiguration
        /// Exit 0 after this many answered contact requests; `nil`: listen until interrupted or ``limit``.
        public var count: Int?
        /// Stop listening (exit 3) after this long without reaching ``count``; `nil`: no limit.
        public var limit: Duration?
        /// Called after each transaction the phone answered (the CLI counts them for the `result`
        /// it prints when Ctrl-C stops the listener).
        public var onAnswered: (@Sendable () -> Void)?

        /// Listen with `phone`'s settings.
        public init(phone: PhoneConfiguration, count: Int? = nil, limit: Duration? = nil) {
            self.phone = phone
            self.count = count
            self.limit = limit
        }
    }

    /// Runs `--listen`; returns the exit status.
    public static func main(_ configuration: Configuration, output: ProgramOutput = .standard) async -> Int32 {
        let phone = configuration.phone
        let relayURL = ProgramChecks.trimmedRelayURL(phone.relayURL)
        let narrator = PhoneNarrator(
            output: output, json: phone.json, relayURL: relayURL, proximityURL: phone.proximityURL, rssi: phone.rssi,
            joinsTunnel: true, flow: "linked", timestamps: true)
        do {
            try await listen(configuration, relayURL: relayURL, narrator: narrator)
            return 0
        } catch {
            let failure = ProgramFailure.from(error, relayURL: relayURL)
            Interruption.beginEnding()
            narrator.event(
                "error",
                JSONLine.errorMembers(failure))
            output.standardError("error: \(failure.message)")
            return failure.exitCode
        }
    }

    private static func listen(_ configuration: Configuration, relayURL: String, narrator: PhoneNarrator) async throws {
        let phone = configuration.phone
        try ProgramChecks.relayURL(phone.relayURL)
        try ProgramChecks.proximityURL(phone.proximityURL)
        if let count = configuration.count, count < 1 { throw ProgramFailure(.badInput, "--count must be at least 1") }
        try ProgramChecks.storePath(phone.storePath, flag: "--store", fileName: PasskeyStore.fileName)
        let proximity = try ProximityEndpoint(parsing: phone.proximityURL)
        let passkeyPath = phone.storePath ?? PasskeyStore.defaultPath(environment: phone.environment)
        var store = try PhoneLinking.load(passkeyStorePath: passkeyPath) { narrator.say($0) }
        do {
            // A damaged store is found now, not as a refusal of every contact request; and every
            // request is answered under its lock.
            _ = try PasskeyStore.load(path: passkeyPath)
            try StoreLock.checkWritable(path: passkeyPath)
        } catch {
            throw ProgramFailure(error.failureKind, "cannot use the passkey store: \(error)\(error.advice)")
        }
        if store.identity == nil {
            store.identity = PhoneLinkStore.Identity()
            try store.save()
        }
        guard let identity = store.identity else { preconditionFailure("identity created above") }
        let linkStorePath = store.path
        narrator.say("listening as \"\(identity.name)\" on \(relayURL) for contact requests (link store \(store.path))")
        let seen = SeenNonces()
        let answeredSoFar = Mutex(0)
        let countAnswer: @Sendable () -> Int = {
            answeredSoFar.withLock { count in
                count += 1
                return count
            }
        }
        // One state: an outage is narrated once, not every retry, and a timeout can tell a relay
        // that was never reached from a quiet link.
        let relay = Mutex(RelayReach.starting)
        let ignoredPushes = RefusalLog(noun: "ignored push(es)") { narrator.say($0) }
        defer { ignoredPushes.flush() }  // however listening ends: the pushes over the budget counted
        let events: @Sendable (PhoneListener.Event) -> Void = { event in
            switch event {
            case .listening(let url):
                relay.withLock { $0 = .reached }
                narrator.say("push channel open on \(url)")
                narrator.event("listening", [("relay", .string(url))])
            case .unreachable(let reason, let retry, let cause):
                let previous = relay.withLock { state in
                    defer { state = .failing(reason, cause, everReached: state.everReached) }
                    return state
                }
                if case .failing = previous { return }
                // Said as it happened: an open channel that dropped, a relay that answered with a
                // status to try again after (408, 429, 5xx), one that answered wrongly or not at all,
                // or one that could not be reached.
                narrator.event("unreachable", [("cause", .string(cause.rawValue)), ("reason", .string(reason))])
                narrator.say("\(Self.outageLine(cause)) (\(reason)); retrying after \(retry.seconds), backing off to once a second, until it is back")
            case .pushed:
                narrator.say("contact request from a linked desktop")
                narrator.event("contact")
            case .ignored(let reason):
                // A relay can send any number of them: within a budget, the rest counted.
                ignoredPushes.note("ignored a push: \(reason)")
            }
        }
        // `phone --unlink` while this runs: the listener notices the new token in the store
        // (`ListenTokenWatch`; a push for the old contact ID that comes first is refused as
        // revoked), and listening starts again under the new contact ID, announcing the revoked one.
        let start = ContinuousClock.now
        var current = identity
        var answered = 0
        while true {
            var listener = PhoneListener.Configuration(
                relayURL: relayURL, listenToken: current.listenToken, revoked: current.revokedTokens)
            listener.maxBackoff = .seconds(1)
            let contactID = current.contactID
            let watch = ListenTokenWatch(path: linkStorePath, contactID: contactID)
            listener.isCurrent = { watch.isCurrent() }
            do {
                answered += try await PhoneListener.run(
                    listener, count: configuration.count.map { $0 - answered },
                    limit: configuration.limit, start: start, logger: phone.logger, events: events,
                    handle: { push in
                        let verdict = await answer(
                            push, phone: phone, passkeyPath: passkeyPath, linkStorePath: linkStorePath,
                            contactID: contactID, seen: seen, relayURL: relayURL, proximity: proximity, narrator: narrator,
                            countAnswer: countAnswer)
                        if case .answered = verdict { configuration.onAnswered?() }
                        return verdict
                    })
                break
            } catch let replaced as PhoneListener.Replaced {
                throw ProgramFailure(.failed, replaced.description + " (it answered \(answered + replaced.answered) contact request(s))")
            } catch let error as RuntimeError where error.code == .upgradeRejected {
                // 403, 404, 410, …: an answer retrying would not change (PhoneListener rethrows only
                // those), so exit 1, not the network failures' 6 that a supervisor might retry.
                throw ProgramFailure(.failed, Self.refusedListen(error, linkStorePath: linkStorePath))
            } catch let error as RuntimeError where error.code == .timeout {
                // A limit that passed without the relay ever answering is a wrong address or a relay
                // that is down, not a quiet link: say so.
                guard case .failing(let reason, let cause, let everReached) = relay.withLock({ $0 }) else { throw error }
                guard !everReached else {
                    // A channel that was open, and lost: the limit found the phone trying to get it back.
                    throw ProgramFailure(.timeout, "\(error.reason); the push channel to \(relayURL) was down at the end (\(reason))")
                }
                throw ProgramFailure(.timeout, "\(error.reason), and the relay at \(relayURL) \(Self.neverLine(cause)) (\(reason))")
            } catch let revoked as PhoneListener.ContactRevoked {
                answered += revoked.answered
                guard let reloaded = try PhoneLinkStore.load(path: linkStorePath).identity, reloaded.contactID != contactID
                else {
                    throw ProgramFailure(.failed, "the contact ID was revoked but \(linkStorePath) has no new one")
                }
                narrator.say(
                    "this phone's contact ID was revoked (phone --unlink, or \(linkStorePath) replaced); listening under the new one")
                narrator.event("contactRevoked")
                current = reloaded
            }
        }
        Interruption.beginEnding()
        // The last line, like `error: …` and a signal's line, carries no time: it is the result.
        narrator.output.standardError("answered \(answered) contact request(s); done")
        narrator.event("result", resultMembers(answered: answered))
    }

    /// Why the relay's refusal of the push channel ends listening, and what to do: a revoked contact
    /// ID (410) is a link store older than a `phone --unlink` (a backup put back), the relay's 403
    /// for a listen token that is not the contact ID's a store edited or damaged; both need a new
    /// identity. Another 403 (a proxy's) gets no such advice.
    static func refusedListen(_ error: RuntimeError, linkStorePath: String) -> String {
        let remedy = "run `hybrid-sim phone --unlink` to make a new contact ID, then link desktops again by QR code"
        switch error.httpStatus {
        case 410:
            return "\(error.reason): the relay knows this phone's contact ID as revoked, so \(linkStorePath) holds an "
                + "identity from before a `phone --unlink` (a copy put back?); \(remedy)"
        case 403 where error.reason.contains("the listen token is not this contact ID's"):
            // The relay's own words: a proxy or firewall in front of it answers 403 too, for other reasons.
            return "\(error.reason): the listen token in \(linkStorePath) is not this contact ID's (the file edited or "
                + "damaged?); \(remedy)"
        default:
            return "\(error.reason) (retrying would not change it)"
        }
    }

    /// The narration of an outage, as it begins.
    static func outageLine(_ cause: PhoneListener.Outage) -> String {
        switch cause {
        case .unreachable: return "relay unreachable"
        case .unanswered: return "relay took the connection but did not answer the push channel's upgrade"
        case .broken: return "relay answered the push channel's upgrade, but not as a tunnel service"
        case .refused: return "relay refused the push channel for now"
        case .lost: return "push channel lost"
        }
    }

    /// What a listen that timed out without ever opening its channel says of the relay.
    static func neverLine(_ cause: PhoneListener.Outage) -> String {
        switch cause {
        case .unreachable, .lost: return "was never reached"
        case .unanswered: return "never answered the push channel's upgrade"
        case .broken: return "never answered the push channel's upgrade as a tunnel service"
        case .refused: return "never accepted the push channel"
        }
    }

    /// Checks one push and runs the linked transaction.
    static func answer(
        _ push: PushMessage, phone: PhoneConfiguration, passkeyPath: String, linkStorePath: String, contactID: [UInt8],
        seen: SeenNonces, relayURL: String, proximity: ProximityEndpoint, narrator: PhoneNarrator,
        countAnswer: @Sendable () -> Int = { 1 }
    ) async -> PhoneListener.Verdict {
        /// A transaction that did not end in an answer: a line, the `error` event, and the listener goes on.
        func failed(_ failure: ProgramFailure, _ how: String) -> PhoneListener.Verdict {
            narrator.say("linked transaction \(how): \(failure.message)")
            narrator.event("error", [("kind", .string(failure.kind.rawValue)), ("message", .string(failure.message))])
            return .failed(failure.message)
        }
        /// `detail` is for this phone's user only (it names the phone's files): the desktop gets `reason`.
        func refuse(_ reason: String, detail: String? = nil) -> PhoneListener.Verdict {
            narrator.say("refused the contact request: \(reason)" + (detail.map { " (\($0))" } ?? ""))
            narrator.event("refused", [("reason", .string(reason))] + (detail.map { [("detail", .string($0))] } ?? []))
            return .refused(reason)
        }
        guard let payload = try? ClientPayload(cbor: push.clientPayload) else { return refuse("malformed client payload") }
        // Re-read: a QR ceremony run meanwhile may have handed out a new pairing ID; --unlink may have run.
        let readIdentity: PhoneLinkStore.Identity?
        do {
            readIdentity = try PhoneLinkStore.load(path: linkStorePath).identity
        } catch {
            return refuse("the phone's link store is unreadable", detail: "\(error)")
        }
        guard let identity = readIdentity else {
            return refuse(
                "the phone has no link identity",
                detail: "\(linkStorePath) is gone or holds none: restore it, or link desktops again by QR code")
        }
        guard identity.contactID == contactID else {
            narrator.say("refused the contact request: its contact ID was revoked (--unlink)")
            narrator.event("refused", [("reason", .string("contact ID revoked"))])
            return .revoked
        }
        guard identity.pairingIDs.contains(payload.pairingID) else { return refuse("unknown pairing ID") }
        switch seen.see(payload.clientNonce, tunnelID: push.tunnelID) {
        case .new:
            break
        case .replayed:
            return refuse("replayed client payload")
        case .again(answered: true):
            narrator.say("ignored a contact request the relay sent again: this phone answered it already")
            return .failed("the relay sent an answered contact request again")
        case .again(answered: false):
            narrator.say("the relay sent this contact request again (the first try did not reach its tunnel): trying again")
        }

        let store: PasskeyStore
        do {
            store = try PasskeyStore.load(path: passkeyPath)
        } catch {
            return refuse("the phone's passkey store is unusable", detail: "\(error)\(error.advice)")
        }
        var session: LinkedAuthenticatorSession
        do {
            session = try LinkedAuthenticatorSession(
                payload: payload, tunnelID: push.tunnelID, routingID: push.routingID, identityKey: identity.privateKey,
                linkSecret: identity.linkSecret(pairingID: payload.pairingID),
                getInfo: CBOR.encode(SoftwareAuthenticator.getInfo(for: phone.policy).cbor))
            session.keyLog = try KeyLogFile.hook(path: phone.keyLogPath)
        } catch {
            return refuse("\(error)")
        }
        let authenticator = PhoneAuthenticator(store: store, configuration: phone, narrator: narrator)
        let timeout = phone.timeout
        let timeouts = SessionTimeouts(
            advert: timeout, connect: min(.seconds(10), timeout), handshake: timeout, message: min(.seconds(10), timeout),
            userAction: PhoneAuthenticator.decisionLimit(timeout))
        let qrTransports = AuthenticatorDriver.Transports.loopback(
            relayURL: relayURL, proximity: proximity, rssi: Int8(phone.rssi), logger: phone.logger)
        let logger = phone.logger
        let transports = LinkedAuthenticatorDriver.Transports(
            join: { path, timeout in try await WebSocketTunnel.open(url: relayURL + path, timeout: timeout, logger: logger) },
            advertise: qrTransports.advertise)
        do {
            try await LinkedAuthenticatorDriver.run(
                session: session, transports: transports, timeouts: timeouts, events: { narrator.session($0) }
            ) { request, claim in
                await authenticator.respond(request, claim: claim)
            }
        } catch let error as TransactionError where error.runtimeCode == .upgradeRejected && error.httpStatus == 404 {
            // The push came, and the desktop's tunnel was gone by the time this phone joined it.
            return failed(
                ProgramFailure(
                    .network,
                    "\(error.step): \(error.underlying); the desktop gave up or left before this phone joined its tunnel "
                        + "(was this phone stopped or slow meanwhile?)"),
                "failed")
        } catch let error as TransactionError {
            return failed(await authenticator.explain(error) ?? ProgramFailure.fromTransaction(error, relayURL: relayURL), "failed")
        } catch {
            return failed(ProgramFailure(.failed, "\(error)"), "failed")
        }
        // The tunnel ended normally, but the phone refused (no passkey, an ambiguous account, --deny).
        if let failure = await authenticator.failure { return failed(failure, "ended") }
        guard let outcome = await authenticator.outcome else {
            return failed(ProgramFailure(.failed, "the desktop asked for no registration or sign-in"), "ended")
        }
        let (passkey, name): (Passkey, String)
        switch outcome {
        case .registered(let created): (passkey, name) = (created, "registered")
        case .signedIn(let used): (passkey, name) = (used, "signedIn")
        }
        seen.answered(payload.clientNonce)
        let total = countAnswer()
        narrator.say("answered the linked desktop (\(name) \(passkey.label); \(total) answered since the start)")
        narrator.event("answered", [("outcome", .string(name)), ("rpId", .string(passkey.rpID)),
                                    ("signCount", .int(Int(passkey.signCount)))])
        return .answered
    }

    /// The members of the listener's `result` event after its `flow` (which the narrator adds).
    static func resultMembers(answered: Int) -> [(String, JSONLine.Value)] {
        [("answered", .int(answered))]
    }

    /// How Ctrl-C (or SIGTERM) ends a listener, its normal way to stop: `answered(…)` is the count
    /// so far; the `result` event (with `--json`) and a line saying so, exit 0.
    package static func signalEnding(json: Bool, answered: @escaping @Sendable () -> Int)
        -> @Sendable (String, Int32) -> Interruption.Ending
    {
        { signal, _ in
            let count = answered()
            return Interruption.Ending(
                standardOutput: json
                    ? JSONLine(event: "result", [("flow", .string("linked"))] + resultMembers(answered: count)).text : nil,
                standardError: "answered \(count) contact request(s); stopped by \(signal)", status: 0)
        }
    }

    /// Runs `--unlink`: revokes the contact ID and, with `tellingRelay` (`--relay`), tells that
    /// relay at once, as a listening phone would (a listen on the revoked ID naming itself revoked,
    /// within 3 s; a relay that cannot be told learns it at the phone's next `--listen`). Returns the
    /// exit status (0 once the revocation is saved, whether or not the relay was reached).
    public static func unlink(
        _ phone: PhoneConfiguration, tellingRelay: String? = nil, output: ProgramOutput = .standard,
        onSaved: @Sendable () -> Void = {}
    ) async -> Int32 {
        let passkeyPath = phone.storePath ?? PasskeyStore.defaultPath(environment: phone.environment)
        do {
            if let tellingRelay { try ProgramChecks.relayURL(tellingRelay) }
            try ProgramChecks.storePath(phone.storePath, flag: "--store", fileName: PasskeyStore.fileName)
            var store = try PhoneLinking.load(passkeyStorePath: passkeyPath) { output.standardError($0) }
            if store.upgradedFromVersion != nil {
                // The upgrade replaced the contact ID that desktops hold: revoking the new one,
                // which no desktop has, would revoke nothing.
                output.standardError("nothing more to revoke: the links made under the old contact ID have ended with it")
                if phone.json {
                    output.standardOutput(JSONLine(event: "unlinked", [("flow", .string("linked")), ("revoked", .int(0))]).text)
                }
                return 0
            }
            guard var identity = store.identity else {
                output.standardError("no link identity in \(PhoneLinkStore.path(besidePasskeyStore: passkeyPath)); nothing to revoke")
                if phone.json {
                    output.standardOutput(JSONLine(event: "unlinked", [("flow", .string("linked")), ("revoked", .int(0))]).text)
                }
                return 0
            }
            let linkedBefore = !identity.pairingIDs.isEmpty
            identity.rotateContactID()
            store.identity = identity
            do {
                try store.save()
            } catch {
                throw ProgramFailure(.failed, "cannot save the phone's link store: \(error)\(error.advice)")
            }
            onSaved()
            // The relay learns of the revocation from this phone only (as a tunnel service learns
            // from its push service that a registration is gone): say when, not "from now on".
            output.standardError(
                linkedBefore
                    ? "revoked the contact ID (\(store.path)): the relay learns it from this phone's --listen (a running "
                        + "one switches to the new contact ID within a second and announces the old one; a new one "
                        + "announces it at once); from then on every desktop linked to this phone gets 410"
                    : "revoked the contact ID (\(store.path)); no desktop had been linked to this phone, so none is affected")
            var members: [(String, JSONLine.Value)] = [("flow", .string("linked")), ("revoked", .int(identity.revokedContactIDs.count))]
            if let tellingRelay, let revoked = identity.revokedTokens.last {
                let relayURL = ProgramChecks.trimmedRelayURL(tellingRelay)
                let missed = await PhoneListener.sendRevocations(
                    [revoked], relayURL: relayURL, within: .seconds(3), acceptedIsDelivered: false, logger: phone.logger)
                members.append(("relayTold", .bool(missed.isEmpty)))
                output.standardError(
                    missed.isEmpty
                        ? "told the relay at \(relayURL): it answers the old contact ID 410 from now on"
                        : "note: could not tell the relay at \(relayURL) (unreachable, or no 410 within 3 s: a relay that "
                            + "knows no revocations takes the listen instead); it learns of the revocation "
                            + "from this phone's next --listen there")
            }
            Interruption.beginEnding()
            if phone.json {
                output.standardOutput(JSONLine(event: "unlinked", members).text)
            }
            return 0
        } catch {
            let failure = ProgramFailure.from(error, relayURL: phone.relayURL)
            Interruption.beginEnding()
            // As every other phone failure with --json: the error event, last on stdout.
            if phone.json {
                output.standardOutput(JSONLine(event: "error", [("flow", .string("linked"))] + JSONLine.errorMembers(failure)).text)
            }
            output.standardError("error: \(failure.message)")
            return failure.exitCode
        }
    }
}

/// How `phone --listen` last found its relay.
private enum RelayReach: Sendable {
    /// No connection attempt has ended yet.
    case starting
    /// The push channel is open.
    case reached
    /// The last attempt failed (or the channel dropped) for `reason`, as `cause` says.
    case failing(String, PhoneListener.Outage, everReached: Bool)

    var everReached: Bool {
        switch self {
        case .starting: return false
        case .reached: return true
        case .failing(_, _, let everReached): return everReached
        }
    }
}

/// Client nonces this listener took, with the tunnel each came for: a replayed client payload (a
/// nonce seen before, for another tunnel) is refused; the same push sent again by the relay (a
/// phone that listened again before it joined gets it again) is tried again, or ignored once
/// answered.
final class SeenNonces: Sendable {
    /// Remembers at most this many.
    static let capacity = 4096

    /// What a push's nonce was to this listener.
    enum Sighting: Equatable {
        /// Never seen: now remembered.
        case new
        /// Seen for the same tunnel: the relay sent the push again.
        case again(answered: Bool)
        /// Seen for another tunnel.
        case replayed
    }

    private struct Taken {
        let tunnelID: [UInt8]
        var answered = false
    }

    private let nonces = Mutex(RecentMemory<[UInt8], Taken>(capacity: capacity))

    /// Looks `nonce` up for a push to `tunnelID`, remembering it when it is new.
    func see(_ nonce: [UInt8], tunnelID: [UInt8]) -> Sighting {
        nonces.withLock { memory in
            if let taken = memory[nonce] { return taken.tunnelID == tunnelID ? .again(answered: taken.answered) : .replayed }
            memory.remember(nonce, Taken(tunnelID: tunnelID))
            return .new
        }
    }

    /// The transaction of `nonce` was answered.
    func answered(_ nonce: [UInt8]) {
        nonces.withLock { memory in
            guard var taken = memory[nonce] else { return }
            taken.answered = true
            memory.remember(nonce, taken)
        }
    }
}
