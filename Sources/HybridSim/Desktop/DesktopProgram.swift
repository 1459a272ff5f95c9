import CTAP2
import Foundation
import HybridCore
import HybridFiles
import HybridQR
import HybridRuntime
import Logging

/// `hybrid-sim desktop`: the browser showing a QR code, and the relying party behind it.
///
/// ```swift
/// var configuration = DesktopConfiguration()
/// configuration.request = .makeCredential
/// let result = try await DesktopProgram.run(configuration, output: .standard) { ready in
///     // ready.url is the FIDO:/ URL: hand it to a phone
/// }
/// ```
///
/// One run: read the relying-party store (and `--options`), start the embedded relay (unless
/// `--relay`) and the proximity scanner, show the QR code, wait for a nearby phone's advert, run
/// the tunnel handshake, send one makeCredential or getAssertion, check the answer as the relying
/// party, save the store and print the WebAuthn L3 `PublicKeyCredential` JSON. Every wait is
/// bounded by the configuration's timeout.
public enum DesktopProgram {
    /// Runs the desktop and reports a failure the way the CLI does: `error: <message>` on stderr
    /// (and, with `--json`, an `error` event on stdout). Returns the exit status.
    public static func main(
        _ configuration: DesktopConfiguration,
        output: ProgramOutput = .standard,
        onReady: @escaping @Sendable (DesktopEndpoints) -> Void = { _ in }
    ) async -> Int32 {
        do {
            _ = try await run(configuration, output: output, onReady: onReady)
            return 0
        } catch {
            output.standardError("error: \(error.message)")
            return error.exitCode
        }
    }

    /// Runs the desktop once. Progress goes to `output`'s stderr; the QR code and the result (or,
    /// with `--json`, the events including a final `error`) to its stdout. `onReady` is called once
    /// the QR code is shown and the scanner listens.
    ///
    /// - Throws: ``ProgramFailure``; nothing has been printed about it on stderr yet.
    @discardableResult
    public static func run(
        _ configuration: DesktopConfiguration,
        output: ProgramOutput = .standard,
        onReady: @escaping @Sendable (DesktopEndpoints) -> Void = { _ in }
    ) async throws(ProgramFailure) -> DesktopResult {
        var narrator = DesktopNarrator(output: output, json: configuration.json)
        narrator.flow = configuration.eventFlow
        do {
            return try await Run(configuration: configuration, narrator: narrator, onReady: onReady).execute()
        } catch {
            let failure = ProgramFailure.from(error, relayURL: relayDescription(configuration.relay))
            Interruption.beginEnding()
            narrator.event("error", JSONLine.errorMembers(failure))
            throw failure
        }
    }

    private static func relayDescription(_ relay: DesktopConfiguration.Relay) -> String {
        switch relay {
        case .external(let url): return url
        case .embedded(let port): return "ws://127.0.0.1:\(port ?? ProgramDefaults.relayPort)"
        }
    }
}

/// One desktop run's state.
struct Run {
    let configuration: DesktopConfiguration
    let narrator: DesktopNarrator
    let onReady: @Sendable (DesktopEndpoints) -> Void

    var logger: Logger { configuration.logger }

    func execute() async throws -> DesktopResult {
        try configuration.validate()

        // Everything that can be wrong with the input is found before any socket is opened.
        let storePath =
            configuration.rpStorePath ?? RelyingPartyStore.defaultPath(environment: configuration.environment)
        var store: RelyingPartyStore
        do {
            store = try RelyingPartyStore.load(path: storePath)
            // Saved after a verified ceremony, unless the relying party behind --rp-url decides.
            if configuration.rpURL == nil { try StoreLock.checkWritable(path: storePath) }
        } catch {
            throw ProgramFailure(error.failureKind, "cannot use the relying-party store: \(error)\(error.advice)")
        }
        // `--rp-url`: the options come from the relying party's server.
        let link = configuration.rpURL == nil ? nil : try DesktopRelyingPartyLink(configuration: configuration)
        var effective = configuration
        effective.userIdEncoding = configuration.userIdEncoding ?? link?.userIdEncoding
        let anchors = try configuration.attestationRootsPath.map { (path) throws(ProgramFailure) in
            try AttestationRootsFile.load(path)
        }
        let ceremony = try DesktopCeremony(
            configuration: effective,
            store: store,
            challenge: RandomSource.system.bytes(32),
            document: try await link?.fetchOptions(narrator: narrator),
            attestationTrustAnchors: anchors
        )
        DesktopRelyingPartyLink.describeShape(of: ceremony, userIdEncodingGiven: effective.userIdEncoding != nil, narrator: narrator)
        if ceremony.requestType == .getAssertion, !ceremony.foreign, store.credentials(rpId: ceremony.rpId).isEmpty {
            narrator.say(
                "note: \(storePath) has no credential for \(ceremony.rpId) yet; register first with --request mc"
            )
        }

        if configuration.link { try checkLinksFile(configuration.linksPath ?? LinkStore.path(besideRPStore: store.path)) }
        if let name = configuration.linked {
            return try await executeLinked(name: name, ceremony: ceremony, store: &store, rpLink: link)
        }
        var session = ClientSession(
            requestType: ceremony.requestType, timestamp: UInt64(Date().timeIntervalSince1970),
            supportsLinking: configuration.link)
        session.keyLog = try KeyLogFile.hook(path: configuration.keyLogPath)
        let matrix: QRMatrix
        do {
            matrix = try QREncoder.encode(fidoURL: session.url)
        } catch {
            throw ProgramFailure(.failed, "cannot encode the QR code: \(error)")
        }
        if let png = configuration.qrPNGPath {
            let image = GrayImage(matrix: matrix, moduleSize: 8, quietZone: TerminalArt.defaultQuietZone)
            do {
                // The image holds the QR secret: 0600, never through a symlink.
                try FileWriter.replacePrivately(png, with: try PNGCodec.encode(image))
            } catch {
                // The machine failing (a full disk) is exit 1, as for the stores; a path this user cannot use, 2.
                throw ProgramFailure((error as? FileFailure)?.failureKind ?? .badInput, "cannot write --qr-png \(png): \(error)")
            }
        }

        try checkRequestFits(ceremony)
        let relay = try await startRelay(timeout: ceremony.timeout)
        let scanner: ProximityScanner<[UInt8]>
        let proximity: ProximityEndpoint
        do {
            (scanner, proximity) = try await startScanner(eidKey: session.keys.eidKey)
        } catch {
            await relay.embedded?.shutdown()
            throw error
        }

        let outcome: ClientDriver.Outcome
        do {
            outcome = try await converse(
                session: session,
                ceremony: ceremony,
                matrix: matrix,
                relayURL: relay.url,
                embeddedRelay: relay.embedded,
                proximity: proximity,
                scanner: scanner
            )
        } catch {
            await scanner.stop()
            await relay.embedded?.shutdown()
            throw error
        }
        await scanner.stop()
        await relay.embedded?.shutdown()

        return try await finish(outcome, ceremony: ceremony, store: &store, rpLink: link, offeredLinking: configuration.link)
    }

    /// The end of every ceremony, QR or linked: the relying party's verdict (``finishAndSave``), the
    /// link when this QR ceremony offered linking and the verdict was positive, then the report.
    func finish(
        _ outcome: ClientDriver.Outcome, ceremony: DesktopCeremony, store: inout RelyingPartyStore,
        rpLink: DesktopRelyingPartyLink?, offeredLinking: Bool
    ) async throws -> DesktopResult {
        let result = try await finishAndSave(response: outcome.response, ceremony: ceremony, store: &store, rpLink: rpLink)
        if offeredLinking, rpLink != nil || result.relyingPartyCheck == .verified {
            try storeLink(outcome.linking, storePath: store.path)
        }
        DesktopRelyingPartyLink.describeOutcome(result, of: ceremony, narrator: narrator)
        report(result, storePath: store.path)
        return result
    }

    /// Checks the phone's answer as the relying party and saves the store when it verified; with
    /// `--rp-url` the relying party behind it decides instead (its rejection throws, exit 5) and the
    /// local store is not touched.
    func finishAndSave(
        response: [UInt8], ceremony: DesktopCeremony, store: inout RelyingPartyStore, rpLink: DesktopRelyingPartyLink?
    ) async throws -> DesktopResult {
        let result = try ceremony.finish(response: response, store: &store, now: UInt64(Date().timeIntervalSince1970))
        if let rpLink {
            try await rpLink.confirm(result, narrator: narrator)
        } else if case .verified = result.relyingPartyCheck {
            do {
                try store.save()
            } catch {
                throw ProgramFailure(.failed, "verified, but cannot save the relying-party store: \(error)\(error.advice)")
            }
        }
        return result
    }

    /// Shows the QR code, waits for the phone and runs the transaction.
    private func converse(
        session: ClientSession,
        ceremony: DesktopCeremony,
        matrix: QRMatrix,
        relayURL: String,
        embeddedRelay: TunnelRelay?,
        proximity: ProximityEndpoint,
        scanner: ProximityScanner<[UInt8]>
    ) async throws -> ClientDriver.Outcome {
        let art = TerminalArt.render(matrix, inverted: configuration.invertQR)
        narrator.say("relying party: \(ceremony.summary)")
        if let png = configuration.qrPNGPath { narrator.say("wrote the QR code to \(png)") }
        if configuration.json {
            narrator.event(
                "qr",
                [
                    ("url", .string(session.url)), ("request", .string(ceremony.requestType.rawValue)),
                    ("relay", .string(relayURL)), ("proximity", .string(proximity.description)),
                    ("rpId", .string(ceremony.rpId)), ("origin", .string(ceremony.origin)),
                    ("challenge", .string(Base64URL.encode(ceremony.challenge))),
                ]
            )
        } else {
            let lines = art.split(separator: "\n", omittingEmptySubsequences: false)
            let width = lines.map(\.count).max() ?? 0
            for line in lines {
                narrator.output.standardOutput(String(line))
            }
            narrator.output.standardOutput(session.url)
            // After the art, so that what a narrow terminal wrapped does not push the note out of view.
            for note in TerminalFit.notes(artWidth: width, environment: configuration.environment, pngPath: configuration.qrPNGPath) {
                narrator.say("note: " + note)
            }
        }
        // A line that runs as it is: the PNG to scan when there is one, else the code's URL, in the
        // environment: a command line is every local user's to read (`ps`), a process's environment
        // its own user's, and the URL is the QR secret (with it another user's phone could answer).
        let (scan, hint) =
            configuration.qrPNGPath.map { (["--scan", $0], "or \(PhoneConfiguration.qrVariable)=FIDO:/… with the FIDO:/ line instead of --scan") }
            ?? ([], "or --scan FILE with the QR code saved as text or PNG")
        let environment = configuration.qrPNGPath == nil ? "\(PhoneConfiguration.qrVariable)=\(Self.shellWord(session.url)) " : ""
        narrator.say(
            Self.phoneCommand(environment: environment, scan: scan, relayURL: relayURL, proximity: proximity.description, hint: hint))
        narrator.say(
            "waiting for a nearby phone (proximity \(proximity), relay \(relayURL), timeout \(ceremony.timeout.seconds))"
        )
        onReady(
            DesktopEndpoints(
                url: session.url,
                relayURL: relayURL,
                proximityURL: proximity.description,
                challenge: ceremony.challenge,
                terminalArt: art
            )
        )

        let timeout = ceremony.timeout
        let timeouts = SessionTimeouts(
            advert: timeout,
            connect: min(.seconds(10), timeout),
            handshake: timeout,
            message: min(.seconds(10), timeout),
            userAction: timeout
        )
        let narrator = self.narrator
        var transports = ClientDriver.Transports.loopback(relayURL: relayURL, scanner: scanner, logger: logger)
        var request = ceremony.requestBytes
        if let misbehave = configuration.misbehave {
            narrator.say("note: misbehaving on purpose: \(misbehave.rawValue)")
            transports = misbehave.wrap(transports)
            request = misbehave.request(request)
        }
        // A phone advertising for another QR code (an old capture scanned again, another desktop's)
        // is said when its first advert arrives, not only when the wait times out; as noise of the
        // same shape looks the same (it does not decrypt either), the note names both.
        let otherCode = Task { [scanner] in
            while (try? await Task.sleep(for: .milliseconds(200))) != nil {
                let seen = scanner.statistics
                guard seen.matched == 0 else { return }
                if seen.notOurs > 0, !Task.isCancelled {
                    narrator.say(
                        "note: adverts are arriving that are not for this QR code (a phone that scanned an old capture or another desktop's code, "
                            + "or other traffic on the port: the two look alike); still waiting for this one")
                    return
                }
            }
        }
        defer { otherCode.cancel() }  // any other way out
        /// Ends the watcher before the result or the error is told, so no note follows it.
        func endWatcher() async {
            otherCode.cancel()
            await otherCode.value
        }
        do {
            let outcome = try await ClientDriver.run(
                session: session,
                request: request,
                transports: transports,
                timeouts: timeouts,
                events: { narrator.session($0) }
            )
            await endWatcher()
            return outcome
        } catch let error as TransactionError {
            await endWatcher()
            if let runtime = error.underlying as? RuntimeError, runtime.code == .noNearbyAuthenticator {
                // A phone advertises only once it has its tunnel: with nothing at the relay's
                // address, the relay is the likelier culprit than the phone.
                let noAdvert = (runtime.proximityStatistics?.received ?? 0) == 0
                let relayDown = noAdvert && Self.refusesConnections(relayURL)
                // What the embedded relay saw instead (a tunnel opened, a request refused) replaces
                // the guess that no phone runs.
                let sighting = noAdvert ? Self.relaySighting(embeddedRelay?.statistics, relayURL: relayURL, proximity: proximity) : nil
                throw ProgramFailure(
                    .timeout,
                    "no nearby authenticator within \(timeout.seconds): "
                        + (sighting ?? Self.explain(runtime.proximityStatistics, proximity: proximity))
                        + (relayDown ? "; and nothing accepts connections at the relay \(relayURL), so no phone could open its tunnel (is --relay right?)" : "")
                )
            }
            var failure = ProgramFailure.fromTransaction(error, relayURL: relayURL)
            if case .embedded(port: nil) = configuration.relay, relayURL != ProgramDefaults.relayURL,
                let runtime = error.underlying as? RuntimeError, runtime.code == .upgradeRejected, runtime.httpStatus == 404
            {
                // The advert matched, so the phone opened its tunnel, and on another relay than this
                // one: most often one left running on the default port this desktop moved away from.
                failure.message += "; the phone opened its tunnel on another relay (one still running on \(ProgramDefaults.relayURL)?): give it --relay \(relayURL)"
            }
            throw failure
        }
    }

    /// Whether the relay at `url` (`ws://host:port`) refuses TCP connections right now.
    static func refusesConnections(_ url: String) -> Bool {
        guard let components = URLComponents(string: url), let host = components.host, let port = components.port else {
            return false
        }
        return BindConflict.refusesConnections(host: host, port: port)
    }

    /// What the scanner saw, e.g. "3 adverts ignored: 3 too far (strongest -90 dBm < -70)".
    /// `session` names what an advert is checked against: "this QR code", or "this link" in the
    /// linked flow (which shows none).
    static func explain(_ statistics: ProximityStatistics?, proximity: ProximityEndpoint, session: String = "this QR code") -> String {
        guard let statistics, statistics.received > 0 else {
            return "no advert arrived at \(proximity) (is `hybrid-sim phone` running with --proximity \(proximity)?)"
        }
        var parts: [String] = []
        if statistics.tooFar > 0 {
            let strongest = statistics.strongestTooFarRSSI.map { "strongest \($0) dBm" } ?? "rssi"
            parts.append("\(statistics.tooFar) too far (\(strongest) < \(statistics.minRSSI))")
        }
        if statistics.invalid > 0 {
            parts.append("\(statistics.invalid) for \(session) but invalid (first: \(statistics.invalidReason ?? "unusable plaintext"))")
        }
        if statistics.notOurs > 0 { parts.append("\(statistics.notOurs) not for \(session)") }
        if statistics.replayed > 0 { parts.append("\(statistics.replayed) repeated") }
        if statistics.wrongLength > 0 { parts.append("\(statistics.wrongLength) malformed (not 23 bytes)") }
        if statistics.unknownServiceUUID > 0 {
            parts.append("\(statistics.unknownServiceUUID) with an unknown service UUID\(statistics.unknownServiceUUIDDetail)")
        }
        let noun = statistics.ignored == 1 ? "advert" : "adverts"
        return "\(statistics.ignored) \(noun) ignored: " + parts.joined(separator: ", ")
    }

    /// The `phone command:` line: `environment` (assignments, each ending with a space) before the
    /// command, every argument a shell word (``shellWord(_:)``), so that `ws://[::1]:47001` is no
    /// glob to zsh or to bash with `failglob`.
    static func phoneCommand(environment: String = "", scan: [String], relayURL: String, proximity: String, hint: String) -> String {
        let words = ["hybrid-sim", "phone"] + scan + ["--relay", relayURL, "--proximity", proximity]
        return "phone command: \(environment)\(words.map(shellWord).joined(separator: " "))  (\(hint))"
    }

    /// `text` as one word for a POSIX shell: as it is when it holds only safe characters, else in
    /// single quotes, so a `phone command:` line can be pasted.
    static func shellWord(_ text: String) -> String {
        let safe = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-")
        guard text.isEmpty || !text.allSatisfy(safe.contains) else { return text }
        return "'" + text.replacingOccurrences(of: "'", with: #"'\''"#) + "'"
    }

    /// Prints the verified result.
    func report(_ result: DesktopResult, storePath: String) {
        Interruption.beginEnding()
        for note in result.notes { narrator.say("note: \(note)") }
        let id = Base64URL.encode(result.credentialId)
        switch (result.request, result.relyingPartyCheck) {
        case (.makeCredential, _):
            let user = result.credential?.userName ?? "the user"
            // With --rp-url the relying party keeps the credential; the desktop's store is not touched.
            let kept = configuration.rpURL.map { "kept by the relying party at \($0)" } ?? "saved in \(storePath)"
            // A full attestation says what it proved; none and self keep the line they always had.
            let proof = result.attestation.map { $0.type == .basic ? ": \($0.summary)" : "" } ?? ""
            narrator.say(
                "verified: registered credential \(id) for \(user) @ \(result.rpId) (\(result.credential?.attestationFormat ?? "none") attestation\(proof)), \(kept)"
            )
        case (.getAssertion, .verified):
            let user = result.credential?.userName ?? "the user"
            let before = result.previousSignCount.map { "\($0) → " } ?? ""
            narrator.say(
                "verified: \(user) signed in to \(result.rpId) with credential \(id) (signCount \(before)\(result.credential?.signCount ?? 0))"
            )
        case (.getAssertion, .skipped(let why)):
            // With --rp-url the relying party's verdict was already printed.
            if configuration.rpURL == nil { narrator.say("built-in relying-party check skipped: \(why)") }
        }
        if configuration.json {
            let check: String
            switch result.relyingPartyCheck {
            case .verified: check = "verified"
            case .skipped: check = "skipped"
            }
            // The same names as the phone's `result` (user, credentialId, signCount), so a script
            // reads both sides alike; user and signCount only when the desktop's store knows them.
            var members: [(String, JSONLine.Value)] = [
                ("request", .string(result.request.rawValue)), ("rpId", .string(result.rpId)),
                ("rpCheck", .string(check)), ("credentialId", .string(id)),
            ]
            if let credential = result.credential {
                if let user = credential.userName { members.append(("user", .string(user))) }
                members.append(("signCount", .int(Int(credential.signCount))))
            }
            // Only for full attestation, so that every other result stays as it was.
            if let attestation = result.attestation, attestation.type == .basic {
                members.append(("attestation", .string(attestation.type.rawValue)))
                members.append(("attestationTrusted", .bool(attestation.isTrusted)))
            }
            members.append(("credential", .raw(result.credentialJSON)))
            narrator.event("result", members)
        } else {
            for line in result.prettyCredentialJSON.split(separator: "\n", omittingEmptySubsequences: false) {
                narrator.output.standardOutput(String(line))
            }
        }
    }

    // MARK: - Relay and scanner

    /// A request a relay cannot carry in one message is refused before the QR code is shown when
    /// the relay is the embedded one (its limit is known), and noted otherwise: the relay would
    /// close the tunnel with 1009 only once the phone had scanned the code and answered the handshake.
    func checkRequestFits(_ ceremony: DesktopCeremony) throws(ProgramFailure) {
        let request = ceremony.requestBytes
        let size = ClientSession.encryptedSize(ofRequest: request)
        let limit = RelayConfiguration().maxMessageSize
        guard size > limit else { return }
        let (count, list): (Int, String)
        switch ceremony.options {
        case .registration(let options): (count, list) = (options.excludeCredentials?.count ?? 0, "excludeCredentials")
        case .authentication: (count, list) = (ceremony.allowCredentialIds.count, "allowCredentials")
        }
        let listed = "\(count) \(list)"
        let advice = count > 0 ? "list fewer credentials, or shorten the options (user and relying-party names, display names)" : "shorten the options (user and relying-party names, display names)"
        let what =
            "the \(ceremony.requestType == .makeCredential ? "makeCredential" : "getAssertion") request is \(size) bytes "
            + "encrypted (\(request.count) of CTAP2, with \(listed))"
        switch configuration.relay {
        case .embedded:
            throw ProgramFailure(
                .badInput, "\(what), more than the embedded relay carries in one message (\(limit) bytes): \(advice)")
        case .external(let url):
            narrator.say(
                "note: \(what); hybrid-sim relay carries at most \(limit) bytes a message unless started with a larger "
                    + "--max-message-size, so the relay at \(ProgramChecks.trimmedRelayURL(url)) may close the tunnel with 1009")
        }
    }
}
