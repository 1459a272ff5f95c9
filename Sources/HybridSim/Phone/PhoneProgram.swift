import CTAP2
import Foundation
import HybridCore
import HybridQR
import HybridRuntime
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `hybrid-sim phone`: the phone that scans the desktop's QR code and answers as an authenticator.
///
/// One run: read the QR code (a `FIDO:/` URL, or a PNG/PGM/terminal capture decoded with a real QR
/// decoder) and the passkey store, open a tunnel at the relay, advertise over the proximity stub
/// until the desktop's handshake arrives, answer its one request with the store's passkeys (saving
/// a new or updated passkey before answering), and wait for the desktop's shutdown.
public enum PhoneProgram {
    /// Runs the phone and reports a failure the way the CLI does: `error: <message>` on stderr
    /// (and, with `--json`, an `error` event on stdout). Returns the exit status.
    public static func main(_ configuration: PhoneConfiguration, output: ProgramOutput = .standard) async -> Int32 {
        do {
            _ = try await run(configuration, output: output)
            return 0
        } catch {
            output.standardError("error: \(error.message)")
            return error.exitCode
        }
    }

    /// Runs the phone once.
    ///
    /// - Throws: ``ProgramFailure``; nothing has been printed about it on stderr yet.
    @discardableResult
    public static func run(
        _ configuration: PhoneConfiguration,
        output: ProgramOutput = .standard
    ) async throws(ProgramFailure) -> PhoneResult {
        let relayURL = ProgramChecks.trimmedRelayURL(configuration.relayURL)
        let narrator = PhoneNarrator(
            output: output,
            json: configuration.json,
            relayURL: relayURL,
            proximityURL: configuration.proximityURL,
            rssi: configuration.rssi
        )
        do {
            return try await execute(configuration, relayURL: relayURL, narrator: narrator)
        } catch {
            let failure = ProgramFailure.from(error, relayURL: relayURL)
            Interruption.beginEnding()
            narrator.event("error", JSONLine.errorMembers(failure))
            throw failure
        }
    }

    private static func execute(
        _ configuration: PhoneConfiguration,
        relayURL: String,
        narrator: PhoneNarrator
    ) async throws -> PhoneResult {
        try configuration.validate()
        // Input first: a bad QR code or a damaged store fails before any socket is opened.
        let (url, payload) = try readQR(configuration.qr, environment: configuration.environment, narrator: narrator)
        let storePath = configuration.storePath ?? PasskeyStore.defaultPath(environment: configuration.environment)
        let store: PasskeyStore
        do {
            store = try PasskeyStore.load(path: storePath)
            // Every request is answered under the store's lock, and a new passkey is saved.
            try StoreLock.checkWritable(path: storePath)
        } catch {
            throw ProgramFailure(error.failureKind, "cannot use the passkey store: \(error)\(error.advice)")
        }
        let proximity = try ProximityEndpoint(parsing: configuration.proximityURL)

        let kind = payload.requestType == .makeCredential ? "a registration request (mc)" : "a sign-in request (ga)"
        narrator.say("QR for \(kind); connecting to relay \(relayURL)")
        narrator.event("qr", [("url", .string(url)), ("request", .string(payload.requestType.rawValue))])

        // Its AAGUID is the one a new credential and its attestation certificate carry (packed-x5c).
        let getInfo = CBOR.encode(SoftwareAuthenticator.getInfo(for: configuration.policy).cbor)
        let linking = try PhoneLinking.identityForQR(payload, passkeyStorePath: storePath, narrator: narrator)
        var session: AuthenticatorSession
        do {
            session = try AuthenticatorSession(qr: payload, getInfo: getInfo, linking: linking)
        } catch {
            throw ProgramFailure(.badInput, "the QR code is not usable: \(error)")
        }
        session.keyLog = try KeyLogFile.hook(path: configuration.keyLogPath)
        let authenticator = PhoneAuthenticator(store: store, configuration: configuration, narrator: narrator)
        let timeout = configuration.timeout
        let timeouts = SessionTimeouts(
            advert: timeout,
            connect: min(.seconds(10), timeout),
            handshake: timeout,
            message: min(.seconds(10), timeout),
            userAction: PhoneAuthenticator.decisionLimit(timeout)
        )
        var transports = AuthenticatorDriver.Transports.loopback(
            relayURL: relayURL, proximity: proximity, rssi: Int8(configuration.rssi), logger: configuration.logger)
        let misbehave = configuration.misbehave
        if let misbehave {
            narrator.say("note: misbehaving on purpose: \(misbehave.rawValue)")
            transports = misbehave.wrap(transports, session: &session)
        }
        do {
            try await AuthenticatorDriver.run(
                session: session,
                transports: transports,
                timeouts: timeouts,
                events: { narrator.session($0) }
            ) { request, claim in
                let response = await authenticator.respond(request, claim: claim)
                return misbehave?.response(response) ?? response
            }
        } catch let error as TransactionError {
            // A refusal, a failed save or an unanswered question explains an early end better
            // than the transport does.
            if let failure = await authenticator.explain(error) { throw failure }
            throw phoneFailure(error, relayURL: relayURL, proximity: proximity, timeout: timeout)
        }
        if let failure = await authenticator.failure { throw failure }
        guard let outcome = await authenticator.outcome else {
            let asked = await authenticator.commands.map { "\(CTAP2Command(rawValue: $0))" }
            throw ProgramFailure(
                .failed,
                "the desktop ended the transaction without a registration or sign-in"
                    + (asked.isEmpty ? "" : " (it asked only for \(asked.joined(separator: ", ")); nothing was saved)"))
        }
        Interruption.beginEnding()
        narrator.say("done")
        let passkey: Passkey
        let name: String
        switch outcome {
        case .registered(let created): (passkey, name) = (created, "registered")
        case .signedIn(let used): (passkey, name) = (used, "signedIn")
        }
        narrator.event(
            "result",
            [
                ("outcome", .string(name)), ("rpId", .string(passkey.rpID)), ("user", .string(passkey.userName ?? "")),
                ("credentialId", .string(Base64URL.encode(passkey.credentialID))),
                ("signCount", .int(Int(passkey.signCount))),
            ]
        )
        return PhoneResult(outcome: outcome, storePath: storePath)
    }

    /// The QR code's URL and payload.
    private static func readQR(
        _ source: PhoneConfiguration.QRSource, environment: [String: String], narrator: PhoneNarrator
    ) throws(ProgramFailure) -> (String, QRPayload) {
        switch source {
        case .url(let text):
            return try parseQR(text, from: "--qr")
        case .environment(let name):
            return try parseQR(environment[name] ?? "", from: name)
        case .file(let path):
            do {
                let scan = try QRScanner.scanFIDO(fileAt: path)
                for note in scan.notes(about: path) { narrator.say("note: " + note) }
                return (scan.url, scan.payload)
            } catch {
                throw ProgramFailure(.badInput, "cannot read a FIDO:/ QR code from \(path): \(error)")
            }
        }
    }

    /// The URL and payload of `text`, the code as text from `source` (`--qr`, `HYBRID_SIM_QR`).
    private static func parseQR(_ text: String, from source: String) throws(ProgramFailure) -> (String, QRPayload) {
        // A URL pasted from a terminal that wrapped it holds line breaks (and an indent) between
        // its digits: a FIDO:/ URL holds no space, so every white space is dropped.
        let url = String(text.unicodeScalars.filter { !$0.properties.isWhitespace }.map(Character.init))
        do {
            return (url, try QRPayload(url: url))
        } catch {
            let digits = url.hasPrefix("FIDO:/") ? url.dropFirst(6).count : 0
            // A desktop's code holds about 170 digits; far fewer is a paste cut short.
            let hint = url.hasPrefix("FIDO:/") && digits < 120
                ? " (\(digits) digits after FIDO:/, where a desktop's code has about 170: was the paste cut short?)" : ""
            throw ProgramFailure(.badInput, "\(source) is not a valid FIDO:/ URL: \(error.reason)\(hint)")
        }
    }

    /// A driver failure in the phone's words.
    static func phoneFailure(
        _ error: TransactionError,
        relayURL: String,
        proximity: ProximityEndpoint,
        timeout: Duration
    ) -> ProgramFailure {
        if let runtime = error.underlying as? RuntimeError, runtime.code == .timeout,
            error.step == "waiting for the desktop's handshake"
        {
            // The phone cannot see the desktop join: no handshake is all it knows.
            return ProgramFailure(
                .timeout,
                "no handshake from the desktop within \(timeout.seconds) (it did not connect, or connected and sent nothing): "
                    + "is it scanning \(proximity), and is --rssi at least its --min-rssi? "
                    + "Or did the relay refuse its /cable/connect (the relay's log names the request)?"
            )
        }
        if let runtime = error.underlying as? RuntimeError, runtime.code == .timeout,
            error.step == "waiting for the desktop's request"
        {
            // The wait for the request is the message timeout (``SessionTimeouts`` above).
            return ProgramFailure(.timeout, "the desktop sent no request within \(min(Duration.seconds(10), timeout).seconds) after the handshake (or the relay did not pass it on)")
        }
        return ProgramFailure.fromTransaction(error, relayURL: relayURL)
    }

    // MARK: - Asking on the terminal

    /// A chooser that lists the accounts on stderr and reads a number (or a name) from standard
    /// input, waiting at most `timeout`; `nil` when standard input is not a terminal.
    public static func terminalAccountChooser(
        output: ProgramOutput = .standard,
        timeout: Duration = .seconds(60)
    ) -> AccountChooser? {
        guard isatty(STDIN_FILENO) == 1 else { return nil }
        return { rpId, accounts in
            output.standardError("\(accounts.count) passkeys for \(rpId) on this phone:")
            for (index, passkey) in accounts.enumerated() {
                // A relying party's text: escaped, as every line that shows a peer's words is.
                let display = passkey.userDisplayName.map { $0 == passkey.userName ? "" : " (\(PeerText.printable($0, limit: PeerText.lineLimit)))" } ?? ""
                output.standardError(
                    "  \(index + 1)) \(PeerText.printable(passkey.userName ?? Base64URL.encode(passkey.userID), limit: PeerText.lineLimit))\(display)"
                )
            }
            output.standardError("sign in as which one? [1-\(accounts.count), empty to cancel]")
            // An answer that names none is asked again (three tries), not taken for a refusal.
            for attempt in 1...3 {
                guard let answer = await TerminalLines.shared.next(timeout: timeout)?.trimmingCharacters(in: .whitespaces), !answer.isEmpty
                else {
                    return nil
                }
                if let number = Int(answer), (1...accounts.count).contains(number) { return accounts[number - 1] }
                if let named = PhoneAuthenticator.named(answer, among: accounts).first { return named }
                let printable = PeerText.printable(answer, limit: 64)
                output.standardError(
                    attempt < 3
                        ? "\"\(printable)\" is none of them; answer 1-\(accounts.count) or an account's name (empty to cancel)"
                        : "\"\(printable)\" is none of them either; giving up")
            }
            return nil
        }
    }
}
