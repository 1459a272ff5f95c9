import CTAP2
import Foundation
import HybridCore
import HybridRuntime

/// The desktop's linked flow: `--link` stores verified linking information after a QR ceremony;
/// `--linked NAME|any` runs a ceremony through a stored link with no QR code (Docs/LINKING.md).
extension Run {
    /// `--link`: stores the phone's linking information, which the session already verified against
    /// the handshake hash (an invalid update fails the ceremony before this point, so it can never
    /// replace or evict a good link).
    func storeLink(_ linking: LinkingInfo?, storePath rpStorePath: String) throws {
        guard let linking else {
            narrator.say("note: the phone sent no linking information; nothing linked")
            return
        }
        let path = configuration.linksPath ?? LinkStore.path(besideRPStore: rpStorePath)
        let name: String
        do {
            name = try LinkStore.upsert(
                StoredLink(linking, tunnelDomain: 0, linkedAt: UInt64(Date().timeIntervalSince1970)), path: path)
        } catch {
            throw ProgramFailure(.failed, "verified, but cannot save the links file: \(error)\(error.advice)")
        }
        let renamed = name == linking.name ? "" : " as \"\(name)\" (another linked phone has its name)"
        narrator.say("linked phone \"\(linking.name)\"\(renamed) (signature verified), saved in \(path); next time: --linked \"\(name)\"")
        narrator.event("linked", [("phone", .string(name)), ("links", .string(path))])
    }

    /// `--linked`: contacts the stored phone, runs NKpsk0 and the request, and verifies the answer.
    func executeLinked(
        name: String, ceremony: DesktopCeremony, store: inout RelyingPartyStore, rpLink: DesktopRelyingPartyLink?
    ) async throws -> DesktopResult {
        let path = configuration.linksPath ?? LinkStore.path(besideRPStore: store.path)
        let stored = try loadLinks(path).select(name)
        var session: LinkedClientSession
        do {
            session = try LinkedClientSession(link: stored.link, requestType: ceremony.requestType)
        } catch {
            throw ProgramFailure(.badInput, "the link \"\(stored.name)\" in \(path) is unusable: \(error)")
        }
        session.keyLog = try KeyLogFile.hook(path: configuration.keyLogPath)
        narrator.say("relying party: \(ceremony.summary)")
        try checkRequestFits(ceremony)
        let relay = try await startRelay(timeout: ceremony.timeout)
        let scanner: ProximityScanner<[UInt8]>
        let proximity: ProximityEndpoint
        do {
            (scanner, proximity) = try await startScanner(eidKey: session.eidKey, linked: true)
        } catch {
            await relay.embedded?.shutdown()
            throw error
        }
        narrator.say("contacting linked phone \"\(stored.name)\" through \(relay.url) (no QR code)")
        narrator.event(
            "contact",
            [
                ("phone", .string(stored.name)), ("request", .string(ceremony.requestType.rawValue)),
                ("relay", .string(relay.url)), ("proximity", .string(proximity.description)),
                ("rpId", .string(ceremony.rpId)), ("challenge", .string(Base64URL.encode(ceremony.challenge))),
            ])
        onReady(DesktopEndpoints(
            url: "", relayURL: relay.url, proximityURL: proximity.description, challenge: ceremony.challenge, terminalArt: ""))
        let outcome: ClientDriver.Outcome
        do {
            outcome = try await contact(session: session, ceremony: ceremony, relayURL: relay.url, scanner: scanner, proximity: proximity)
        } catch let error as TransactionError where error.runtimeCode == .upgradeRejected
            && (error.underlying as? RuntimeError)?.httpStatus == 410
        {
            await scanner.stop()
            await relay.embedded?.shutdown()
            try removeLink(stored, path: path)
            if "\(error.underlying)".contains("contact ID unknown") {
                throw ProgramFailure(
                    .linkRevoked,
                    "the relay does not know the linked phone \"\(stored.name)\" (410 Gone: contact ID unknown; no phone "
                        + "announced it: was `hybrid-sim phone --listen` running on this relay?); removed the link from \(path). "
                        + "Link again with --link and a QR code.")
            }
            throw ProgramFailure(
                .linkRevoked,
                "the linked phone \"\(stored.name)\" revoked this link (the relay answered 410 Gone); removed it from \(path). "
                    + "Link again with --link and a QR code.")
        } catch let error as TransactionError where error.runtimeCode == .upgradeRejected
            && (error.underlying as? RuntimeError)?.httpStatus == 504
        {
            // Nobody listens for this contact ID right now: the link stays, the phone is told how to listen.
            await scanner.stop()
            await relay.embedded?.shutdown()
            throw ProgramFailure(
                .network,
                "the linked phone \"\(stored.name)\" is not listening on \(relay.url): the relay answered 504 Gateway "
                    + "Timeout after its contact wait. Start `hybrid-sim phone --listen --relay \(relay.url) --proximity \(proximity)` on the phone "
                    + "(with --account NAME if it holds several passkeys for the site), then try again. The link is kept (for a phone that was wiped or lost, remove it: "
                    + "\(Self.forgetCommand(stored.name, configuration))).")
        } catch let error as TransactionError
            where error.closeCode == .contactRevoked
        {
            // The listening phone was unlinked: its refusal is the same answer as a 410.
            await scanner.stop()
            await relay.embedded?.shutdown()
            try removeLink(stored, path: path)
            throw ProgramFailure(
                .linkRevoked,
                "the linked phone \"\(stored.name)\" revoked this link (it refused the contact: contact ID revoked); "
                    + "removed it from \(path). Link again with --link and a QR code.")
        } catch {
            await scanner.stop()
            await relay.embedded?.shutdown()
            throw error
        }
        await scanner.stop()
        await relay.embedded?.shutdown()
        // A linked session carries no linking information (Chromium ignores it there): nothing to store.
        return try await finish(outcome, ceremony: ceremony, store: &store, rpLink: rpLink, offeredLinking: false)
    }

    private func contact(
        session: LinkedClientSession, ceremony: DesktopCeremony, relayURL: String, scanner: ProximityScanner<[UInt8]>,
        proximity: ProximityEndpoint
    ) async throws -> ClientDriver.Outcome {
        let timeout = ceremony.timeout
        let timeouts = SessionTimeouts(
            advert: timeout, connect: min(.seconds(10), timeout), handshake: timeout, message: min(.seconds(10), timeout),
            userAction: timeout)
        let transports = LinkedClientDriver.Transports.loopback(relayURL: relayURL, scanner: scanner, logger: logger)
        let narrator = self.narrator
        do {
            return try await LinkedClientDriver.run(
                session: session, request: ceremony.requestBytes, transports: transports, timeouts: timeouts,
                events: { narrator.session($0) })
        } catch let error as TransactionError {
            if error.runtimeCode == .upgradeRejected { throw error }
            // A refusal replaces the phone's join, so it comes before the phone's advert; a close like
            // it after that is a relay's, reported as the tunnel's close (exit 6, the link kept).
            let beforeAnswer = LinkedClientDriver.isBeforeTheAdvert(error.step)
            if error.closeCode == .contactRevoked, beforeAnswer { throw error }  // like a 410
            if beforeAnswer, let runtime = error.underlying as? RuntimeError, runtime.code == .closed,
                runtime.closeCode == .policyViolation, let range = runtime.reason.range(of: "phone refused: ")
            {
                // The phone's own refusal, relayed as the tunnel's close reason (Docs/LINKING.md).
                throw ProgramFailure(
                    .refused,
                    "the linked phone refused the contact request: \(runtime.reason[range.upperBound...]) "
                        + "(the link was kept; if the phone no longer knows it, link again with --link)")
            }
            if let runtime = error.underlying as? RuntimeError, runtime.code == .noNearbyAuthenticator {
                throw ProgramFailure(
                    .timeout,
                    "the linked phone did not come near within \(timeout.seconds): "
                        + Self.explain(runtime.proximityStatistics, proximity: proximity, session: "this link")
                        + ((runtime.proximityStatistics?.received ?? 0) == 0
                            ? "; or it took the contact and never answered it (a phone stopped or frozen meanwhile)" : ""))
            }
            let failure = ProgramFailure.fromTransaction(error, relayURL: relayURL)
            let contactWait = RelayConfiguration().contactWait
            if error.step == LinkedClientDriver.contactStep, error.runtimeCode == .timeout, timeouts.connect <= contactWait {
                // The relay answers 504 only after its contact wait: a --timeout no longer than that
                // ends first, and its answer (is the phone listening?) is never heard.
                throw ProgramFailure(
                    .timeout,
                    failure.message + " (a relay waits up to \(contactWait.seconds) for the phone's push channel before it "
                        + "answers 504, phone not listening: give --timeout above \(contactWait.seconds) to hear its answer)")
            }
            throw failure
        }
    }

    /// `--link` saves the phone's link after a verified ceremony: a links file that is damaged, or
    /// that this user could not save, is found at start, not after the phone has answered.
    func checkLinksFile(_ path: String) throws(ProgramFailure) {
        _ = try loadLinks(path)
        do {
            try StoreLock.checkWritable(path: path)
        } catch {
            throw LinkStore.unusable(error)
        }
    }

    /// The links file at `path`; a damaged one is bad input (exit 2), found before any socket.
    func loadLinks(_ path: String) throws(ProgramFailure) -> LinkStore {
        do {
            return try LinkStore.load(path: path)
        } catch {
            throw LinkStore.unusable(error)
        }
    }

    /// Removes exactly the revoked link (re-read first: another run may have changed the file).
    private func removeLink(_ stored: StoredLink, path: String) throws {
        do {
            try LinkStore.remove(name: stored.name, contactID: stored.contactID, path: path)
        } catch {
            throw ProgramFailure(.linkRevoked, "the link \"\(stored.name)\" is revoked, but \(path) could not be updated: \(error)\(error.advice)")
        }
    }

    /// The command that removes the link `name`: `hybrid-sim desktop --forget 'NAME'` with this run's
    /// store flags; for a name the command cannot carry safely (`all`, which means every link, or one
    /// with control characters), where to look it up instead.
    static func forgetCommand(_ name: String, _ configuration: DesktopConfiguration) -> String {
        let flags = storeFlags(configuration)
        if name == "all" || name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0.properties.generalCategory == .format }) {
            return "`hybrid-sim desktop --forget NAME\(flags)` with the name `hybrid-sim desktop --list-links\(flags)` shows"
        }
        return "`hybrid-sim desktop --forget \(shellWord(name))\(flags)`"
    }

    /// The flags that name this run's links file, for a command line it prints: `--links` or
    /// `--rp-store` as given (nothing for the default).
    static func storeFlags(_ configuration: DesktopConfiguration) -> String {
        if let links = configuration.linksPath { return " --links " + Self.shellWord(links) }
        if let store = configuration.rpStorePath { return " --rp-store " + Self.shellWord(store) }
        return ""
    }
}
