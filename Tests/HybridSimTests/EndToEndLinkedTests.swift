import CTAP2
import Foundation
import HybridCore
import HybridRuntime
import HybridSim
import Synchronization
import Testing

/// Linked phones with the real binary, one process per role and a separate `hybrid-sim relay`: a QR
/// registration with `--link`, three `--linked` sign-ins answered by `phone --listen`, then
/// `phone --unlink` and a `--linked` sign-in that fails with 410, exit 8 and the link removed.
@Suite("End to end: linked phones (processes)", .serialized)
struct EndToEndLinkedTests {
    @Test("phone --listen with nobody contacting it ends at --listen-timeout: exit 3, the limit as given")
    func listenTimeout() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (_, relayURL) = try await lab.startRelay()
        let listener = try lab.start("listener", ["phone", "--listen", "--relay", relayURL, "--listen-timeout", "1.5"])
        #expect(try await listener.waitForExit(timeout: .seconds(20)) == 3, "\(listener.transcript)")
        // Not "1.499 s": the limit, not what was left of it when the last round of listening began.
        #expect(FailureOutput.singleErrorLine(listener) == "error: listening for contact requests timed out after 1.5 s")
    }

    @Test("phone --listen on a relay it never reached ends at --listen-timeout saying so: exit 3, the address and the last error")
    func listenNeverReached() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let relayURL = "ws://127.0.0.1:\(try EndToEndLab.closedPort())"
        let listener = try lab.start("listener", ["phone", "--listen", "--relay", relayURL, "--listen-timeout", "1", "--json"])
        #expect(try await listener.waitForExit(timeout: .seconds(20)) == 3, "\(listener.transcript)")
        let events = try listener.standardOutput.lines.map(JSONEvents.parse)
        #expect(events.map { $0["event"] as? String } == ["unreachable", "error"], "one unreachable event per outage: \(events)")
        #expect((events.first?["reason"] as? String)?.contains("connection refused") == true, "\(events)")
        #expect(events.first?["cause"] as? String == "unreachable", "\(events)")
        let line = FailureOutput.singleErrorLine(listener)
        #expect(line.hasPrefix("error: listening for contact requests timed out after 1 s, and the relay at \(relayURL) was never reached ("),
                "\(line)")
        #expect(listener.standardError.untimedLines.contains { $0.hasPrefix("relay unreachable (") && $0.contains("retrying after 0.1 s") },
                "\(listener.transcript)")
    }

    @Test("phone --listen whose open push channel drops (the relay stopped) says the channel was lost, not that the relay was unreachable")
    func listenChannelLost() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (relay, relayURL) = try await lab.startRelay()
        let listener = try lab.start("listener", ["phone", "--listen", "--relay", relayURL, "--listen-timeout", "4", "--json"])
        defer { listener.terminate() }
        try await listener.untilListening()
        relay.terminate()
        #expect(try await listener.waitForExit(timeout: .seconds(20)) == 3, "\(listener.transcript)")
        let lines = listener.standardError.untimedLines
        #expect(lines.contains { $0.hasPrefix("push channel lost (") }, "\(lines)")
        #expect(!lines.contains { $0.hasPrefix("relay unreachable") }, "\(lines)")
        // The limit found it trying to get the channel back: said so, not only "timed out".
        #expect(FailureOutput.singleErrorLine(listener).hasPrefix(
            "error: listening for contact requests timed out after 4 s; the push channel to \(relayURL) was down at the end ("), "\(lines)")
        let events = try listener.standardOutput.lines.map(JSONEvents.parse)
        #expect(events.contains { $0["event"] as? String == "unreachable" && $0["cause"] as? String == "lost" }, "\(events)")
    }

    @Test("phone --listen whose relay answers 503 says the relay refused the push channel for now (it answered), and retries")
    func listenRefusedForNow() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let server = try #require(FixedAnswerServer(answer: "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nfull"))
        defer { server.stop() }
        let listener = try lab.start("listener", ["phone", "--listen", "--relay", "ws://127.0.0.1:\(server.port)", "--listen-timeout", "1", "--json"])
        #expect(try await listener.waitForExit(timeout: .seconds(20)) == 3, "\(listener.transcript)")
        #expect(listener.standardError.untimedLines.contains { $0.hasPrefix("relay refused the push channel for now (relay rejected /cable/listen: 503") && $0.contains("503") },
                "\(listener.transcript)")
        #expect(!listener.standardError.untimedLines.contains { $0.hasPrefix("relay unreachable") }, "\(listener.transcript)")
        let events = try listener.standardOutput.lines.map(JSONEvents.parse)
        #expect(events.first?["event"] as? String == "unreachable" && events.first?["cause"] as? String == "refused", "\(events)")
        #expect(FailureOutput.singleErrorLine(listener).hasPrefix(
            "error: listening for contact requests timed out after 1 s, and the relay at ws://127.0.0.1:\(server.port) never accepted the push channel (relay rejected /cable/listen: 503"),
                "\(listener.transcript)")
    }

    @Test("phone --listen whose relay takes the connection and never answers, or answers as something else, says that, not that it was unreachable")
    func listenUnansweredOrBroken() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        for (answer, line, never, cause) in [
            (nil, "relay took the connection but did not answer the push channel's upgrade (", "never answered the push channel's upgrade (", "unanswered"),
            ("SSH-2.0-OpenSSH_9.6\r\n", "relay answered the push channel's upgrade, but not as a tunnel service (",
             "never answered the push channel's upgrade as a tunnel service (", "broken"),
        ] as [(String?, String, String, String)] {
            let server = try #require(FixedAnswerServer(answer: answer))
            defer { server.stop() }
            let relayURL = "ws://127.0.0.1:\(server.port)"
            let listener = try lab.start("listener-\(cause)", ["phone", "--listen", "--relay", relayURL, "--listen-timeout", "1", "--json"])
            #expect(try await listener.waitForExit(timeout: .seconds(20)) == 3, "\(listener.transcript)")
            #expect(listener.standardError.untimedLines.contains { $0.hasPrefix(line) }, "\(listener.transcript)")
            #expect(!listener.standardError.untimedLines.contains { $0.hasPrefix("relay unreachable") }, "\(listener.transcript)")
            let events = try listener.standardOutput.lines.map(JSONEvents.parse)
            #expect(events.first?["event"] as? String == "unreachable" && events.first?["cause"] as? String == cause, "\(events)")
            #expect(FailureOutput.singleErrorLine(listener).hasPrefix(
                "error: listening for contact requests timed out after 1 s, and the relay at \(relayURL) \(never)"), "\(listener.transcript)")
        }
    }

    @Test("register with --link, three --linked sign-ins, --unlink, then 410 / exit 8 / link gone")
    func linkSignInUnlink() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (_, relayURL) = try await lab.startRelay()
        let links = lab.file("links.json")

        // 1. QR registration with linking.
        let desktop = try await lab.startDesktop(["--request", "mc", "--link", "--relay", relayURL], json: true)
        let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url])
        #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)\n\(phone.transcript)")
        #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")
        let events = try desktop.process.standardOutput.lines.map(JSONEvents.parse)
        #expect(events.allSatisfy { $0["flow"] as? String == "qr-link" })
        let linked = try #require(events.first { $0["event"] as? String == "linked" })
        #expect(linked["phone"] as? String == "HybridSim phone")
        let store = try LinkStore.load(path: links)
        #expect(store.links.map(\.name) == ["HybridSim phone"])
        #expect(try linkedFileMode(links) == 0o600)
        #expect(try linkedFileMode(lab.file(PhoneLinkStore.fileName)) == 0o600)
        let phoneLink = try #require(try PhoneLinkStore.load(path: lab.file(PhoneLinkStore.fileName)).identity)
        #expect(store.links[0].contactID == phoneLink.contactID)
        #expect(phoneLink.pairingIDs == [store.links[0].pairingID])
        let registered = try #require(try RelyingPartyStore.load(path: lab.relyingPartyStore).credentials.first)

        // 2. The phone listens; three desktops sign in through the link, no QR code.
        let proximityPort = try EndToEndLab.closedPort(udp: true)
        let listener = try await lab.startListener("listener", relayURL: relayURL, proximityPort: proximityPort, ["--count", "3", "--listen-timeout", "90", "--json"])
        for round in 1...3 {
            let signIn = try lab.start(
                "linked-\(round)",
                ["desktop", "--request", "ga", "--linked", "any", "--relay", relayURL, "--proximity-port", "\(proximityPort)"])
            #expect(try await signIn.waitForExit(timeout: .seconds(40)) == 0, "\(signIn.transcript)\n\(listener.transcript)")
            #expect(signIn.standardError.lines.contains { $0.hasPrefix("verified: alice signed in to example.com") },
                    "\(signIn.transcript)")
            #expect(!signIn.standardOutput.text.contains("FIDO:/"), "no QR code in a linked sign-in")
            // The contact's 101 comes before the phone judged it: not "tunnel connected" yet.
            #expect(signIn.standardError.lines.contains("tunnel connected (the relay pushed the contact to the linked phone; waiting for it to join and answer)"),
                    "\(signIn.transcript)")
            let credential = try #require(try RelyingPartyStore.load(path: lab.relyingPartyStore).credentials.first)
            #expect(credential.credentialId == registered.credentialId)
            #expect(credential.signCount == UInt32(round))
        }
        #expect(try await listener.waitForExit() == 0, "\(listener.transcript)")
        // Its progress lines begin with the time, as the relay's log does; the last, the result, does not.
        let said = listener.standardError.lines
        #expect(said.last == "answered 3 contact request(s); done", "\(listener.transcript)")
        #expect(said.dropLast().allSatisfy { LogTime.strip($0) != $0 }, "\(listener.transcript)")
        // Every --json event of the listener carries the flow, the transactions' own events too.
        let listened = try listener.standardOutput.lines.map(JSONEvents.parse)
        let names = listened.compactMap { $0["event"] as? String }
        #expect(["listening", "contact", "connected", "advert", "handshake", "request", "response", "answered"]
            .allSatisfy(names.contains) && names.last == "result", "\(names)")
        #expect(listened.allSatisfy { $0["flow"] as? String == "linked" }, "\(listener.standardOutput.text)")
        // The desktop created each tunnel (/cable/contact); the listening phone joined it.
        #expect(listener.standardError.untimedLines.contains { $0.hasPrefix("tunnel joined, advertising (rssi -45 dBm) to ") }, "\(listener.transcript)")

        // 2b. A link whose pairing ID the phone never handed out: the phone refuses (exit 4), the
        // specific reason reaches the desktop, and the links file is not touched.
        let refusing = try await lab.startListener("listener-refusing", relayURL: relayURL, proximityPort: proximityPort, ["--count", "1", "--listen-timeout", "30"])
        var tampered = try LinkStore.load(path: links)
        tampered.links[0].pairingID = tampered.links[0].pairingID.map { $0 ^ 0x5A }
        try tampered.save()
        let tamperedBytes = try Data(contentsOf: URL(fileURLWithPath: links))
        let wrongPairing = try lab.start(
            "linked-wrong-pairing",
            ["desktop", "--request", "ga", "--linked", "any", "--relay", relayURL, "--proximity-port", "\(proximityPort)"])
        #expect(try await wrongPairing.waitForExit(timeout: .seconds(30)) == 4, "\(wrongPairing.transcript)\n\(refusing.transcript)")
        #expect(FailureOutput.singleErrorLine(wrongPairing).contains("the linked phone refused the contact request: unknown pairing ID"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: links)) == tamperedBytes)
        #expect(try RelyingPartyStore.load(path: lab.relyingPartyStore).credentials.first?.signCount == 3)
        refusing.terminate()
        _ = try await refusing.waitForExit()
        try store.save()  // the good link back

        // 2c. A phone listened on this relay but nobody listens now: 504 after the contact wait,
        // exit 6, the link kept, and the desktop says how to listen.
        let unheard = try lab.start(
            "linked-unheard",
            ["desktop", "--request", "ga", "--linked", "any", "--relay", relayURL, "--proximity-port", "\(proximityPort)"])
        #expect(try await unheard.waitForExit(timeout: .seconds(30)) == 6, "\(unheard.transcript)")
        let unheardLine = FailureOutput.singleErrorLine(unheard)
        #expect(unheardLine.contains("is not listening on \(relayURL)"), "\(unheardLine)")
        #expect(unheardLine.contains("`hybrid-sim phone --listen --relay \(relayURL) --proximity udp://127.0.0.1:\(proximityPort)`")
                    && unheardLine.hasSuffix("The link is kept (for a phone that was wiped or lost, remove it: `hybrid-sim desktop --forget 'HybridSim phone'`)."), "\(unheardLine)")
        #expect(try LinkStore.load(path: links).links.count == 1)
        // With a --timeout no longer than the relay's 3 s contact wait the 504 is never heard: the
        // timeout says so (it named only the upgrade, as if the relay were at fault).
        let hasty = try lab.start(
            "linked-hasty",
            ["desktop", "--request", "ga", "--linked", "any", "--relay", relayURL, "--proximity-port", "\(proximityPort)",
             "--timeout", "2"])
        #expect(try await hasty.waitForExit(timeout: .seconds(30)) == 3, "\(hasty.transcript)")
        #expect(
            FailureOutput.singleErrorLine(hasty).hasSuffix(
                "(a relay waits up to 3 s for the phone's push channel before it answers 504, phone not listening: give --timeout above 3 s to hear its answer)"),
            "\(hasty.transcript)")
        #expect(try LinkStore.load(path: links).links.count == 1)

        // 3. Unlink; the listening phone announces the revoked ID; the desktop gets 410 and exits 8.
        let unlink = try lab.start("unlink", ["phone", "--unlink"])
        #expect(try await unlink.waitForExit() == 0, "\(unlink.transcript)")
        let listener2 = try await lab.startListener("listener-2", relayURL: relayURL, proximityPort: proximityPort, ["--count", "1", "--listen-timeout", "20"])  // with the revoked ID announced
        let revoked = try lab.start(
            "linked-revoked",
            ["desktop", "--request", "ga", "--linked", "HybridSim phone", "--relay", relayURL, "--proximity-port",
             "\(proximityPort)", "--json"])
        #expect(try await revoked.waitForExit(timeout: .seconds(30)) == 8, "\(revoked.transcript)")
        let line = FailureOutput.singleErrorLine(revoked)
        #expect(line.contains("revoked this link (the relay answered 410 Gone); removed it from \(links)"), "\(line)")
        let error = try #require(try revoked.standardOutput.lines.map(JSONEvents.parse).last)
        #expect(error["event"] as? String == "error")
        #expect(error["kind"] as? String == "linkRevoked")
        #expect(error["flow"] as? String == "linked")
        #expect(try LinkStore.load(path: links).links.isEmpty)
        listener2.terminate()

        // 4. No link left: --linked any is a clear input error (exit 2).
        let none = try lab.start("linked-none", ["desktop", "--request", "ga", "--linked", "any", "--relay", relayURL])
        #expect(try await none.waitForExit() == 2, "\(none.transcript)")
        #expect(FailureOutput.singleErrorLine(none).contains("no linked phone in \(links)"))
    }

    @Test("--unlink --relay tells that relay at once: a phone that is not listening is unlinked there (410, exit 8), not kept (504); an unreachable relay is a note, exit 0")
    func unlinkTellsTheRelay() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (relayURL, links) = try await registerLinked(lab)
        // The phone listens once, so this relay knows it (a contact while it is away: 504, link kept).
        let proximityPort = try EndToEndLab.closedPort(udp: true)
        let listener = try await lab.startListener("listener", relayURL: relayURL, proximityPort: proximityPort, ["--count", "1", "--listen-timeout", "60"])
        let signIn = try lab.start(
            "linked", ["desktop", "--request", "ga", "--linked", "any", "--relay", relayURL, "--proximity-port", "\(proximityPort)"])
        #expect(try await signIn.waitForExit(timeout: .seconds(40)) == 0, "\(signIn.transcript)\n\(listener.transcript)")
        #expect(try await listener.waitForExit() == 0, "\(listener.transcript)")

        // Unlinked while not listening, telling the relay.
        let unlink = try lab.start("unlink", ["phone", "--unlink", "--relay", relayURL, "--json"])
        #expect(try await unlink.waitForExit() == 0, "\(unlink.transcript)")
        let event = try JSONEvents.parse(try #require(unlink.standardOutput.lines.last))
        #expect(event["event"] as? String == "unlinked" && event["relayTold"] as? Bool == true, "\(unlink.transcript)")
        #expect(unlink.standardError.lines.contains("told the relay at \(relayURL): it answers the old contact ID 410 from now on"))
        let gone = try lab.start(
            "linked-gone", ["desktop", "--request", "ga", "--linked", "any", "--relay", relayURL, "--proximity-port", "\(proximityPort)"])
        #expect(try await gone.waitForExit(timeout: .seconds(30)) == 8, "\(gone.transcript)")
        #expect(FailureOutput.singleErrorLine(gone).contains("revoked this link (the relay answered 410 Gone)"), "\(gone.transcript)")
        #expect(try LinkStore.load(path: links).links.isEmpty)

        // A relay that cannot be told: the revocation is saved all the same, and the phone says when the relay learns it.
        let closed = "ws://127.0.0.1:\(try EndToEndLab.closedPort())"
        let unreachable = try lab.start("unlink-unreachable", ["phone", "--unlink", "--relay", closed, "--json"])
        #expect(try await unreachable.waitForExit() == 0, "\(unreachable.transcript)")
        let missed = try JSONEvents.parse(try #require(unreachable.standardOutput.lines.last))
        #expect(missed["relayTold"] as? Bool == false && missed["revoked"] as? Int == 2, "\(unreachable.transcript)")
        #expect(unreachable.standardError.untimedLines.contains {
            $0.hasPrefix("note: could not tell the relay at \(closed) (") && $0.hasSuffix("it learns of the revocation from this phone's next --listen there")
        }, "\(unreachable.transcript)")
    }

    @Test("--unlink while the phone listens: the running listener moves to its new contact ID at once, the old link gets 410 (exit 8, link gone), and a link made again reaches it")
    func unlinkWhileListening() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (relayURL, links) = try await registerLinked(lab)
        let linkBytes = try Data(contentsOf: URL(fileURLWithPath: links))

        let proximityPort = try EndToEndLab.closedPort(udp: true)
        let listener = try await lab.startListener("listener", relayURL: relayURL, proximityPort: proximityPort, ["--listen-timeout", "90"])
        defer { listener.terminate() }
        func linkedSignIn(_ name: String) throws -> ChildProcess {
            try lab.start(
                name, ["desktop", "--request", "ga", "--linked", "any", "--relay", relayURL, "--proximity-port", "\(proximityPort)"])
        }
        let first = try linkedSignIn("linked-1")
        #expect(try await first.waitForExit(timeout: .seconds(40)) == 0, "\(first.transcript)\n\(listener.transcript)")

        // Unlink while the listener runs: it sees the new token in its store and listens under it,
        // announcing the old one, without waiting for a desktop to contact the old ID.
        let unlink = try lab.start("unlink", ["phone", "--unlink"])
        #expect(try await unlink.waitForExit() == 0, "\(unlink.transcript)")
        try await listener.waitForOutput("listening under the new contact ID", timeout: .seconds(10), in: \.standardError, untimed: true) { lines in
            lines.contains { $0.hasPrefix("this phone's contact ID was revoked (phone --unlink, or ") && $0.hasSuffix(" replaced); listening under the new one") }
                && lines.filter { $0.hasPrefix("push channel open") }.count >= 2
        }
        let gone = try linkedSignIn("linked-revoked")
        #expect(try await gone.waitForExit(timeout: .seconds(40)) == 8, "\(gone.transcript)\n\(listener.transcript)")
        #expect(FailureOutput.singleErrorLine(gone).contains("revoked this link (the relay answered 410 Gone)"), "\(gone.transcript)")
        #expect(try LinkStore.load(path: links).links.isEmpty)
        #expect(listener.isRunning, "the listener keeps listening under its new contact ID")

        // Linked again by QR code (a sign-in with --link): the same running listener answers the new link.
        let relink = try await lab.startDesktop(["--request", "ga", "--link", "--relay", relayURL])
        let scan = try lab.startPhone(for: relink, ["--qr", relink.url])
        #expect(try await relink.process.waitForExit() == 0, "\(relink.process.transcript)\n\(scan.transcript)")
        #expect(try await scan.waitForExit() == 0, "\(scan.transcript)")
        let again = try linkedSignIn("linked-again")
        #expect(try await again.waitForExit(timeout: .seconds(40)) == 0, "\(again.transcript)\n\(listener.transcript)")
        #expect(try LinkStore.load(path: links).links.count == 1)

        // Ctrl-C, the listener's normal stop, still works after the transactions it answered.
        listener.signal(SIGINT)
        #expect(try await listener.waitForExit(timeout: .seconds(10)) == 0, "\(listener.transcript)")
        #expect(
            listener.standardError.untimedLines.last == "answered 2 contact request(s); stopped by SIGINT", "\(listener.transcript)")

        // A push for a revoked ID that reaches a phone before it noticed the revocation is refused
        // with the revoked mark: the relay closes the desktop's tunnel with 4410, which the desktop
        // treats as a 410. A phone in this process plays that listener with the old link's token, on
        // a relay that has not heard of the revocation (this one refuses the old ID at once).
        try linkBytes.write(to: URL(fileURLWithPath: links))
        let oldToken = try #require(try PhoneLinkStore.load(path: lab.file(PhoneLinkStore.fileName)).identity?.revokedTokens.last)
        #expect(oldToken.contactID == (try LinkStore.load(path: links).links.first?.contactID))
        let (_, freshRelayURL) = try await lab.startRelay()
        let pushed = Mutex(false)
        let refusing = Task {
            try await PhoneListener.run(
                PhoneListener.Configuration(relayURL: freshRelayURL, listenToken: oldToken), count: nil, limit: .seconds(40),
                events: { if case .listening = $0 { pushed.withLock { $0 = true } } }
            ) { _ in .revoked }
        }
        defer { refusing.cancel() }
        let deadline = ContinuousClock.now + .seconds(10)
        while !pushed.withLock({ $0 }), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let refused = try lab.start(
            "linked-refused",
            ["desktop", "--request", "ga", "--linked", "any", "--relay", freshRelayURL, "--proximity-port", "\(proximityPort)"])
        #expect(try await refused.waitForExit(timeout: .seconds(40)) == 8, "\(refused.transcript)")
        #expect(FailureOutput.singleErrorLine(refused).contains("revoked this link (it refused the contact: contact ID revoked)"),
                "\(refused.transcript)")
        #expect(try LinkStore.load(path: links).links.isEmpty)
    }
}

extension EndToEndLinkedTests {
    /// The linked flow's proximity failure names what an advert is checked against: "this link"
    /// (the QR flow's wording, "this QR code", would point at a code the linked flow never shows).
    @Test("a linked phone whose adverts do not authenticate under the link: 'did not come near within 3 s: … not for this link', exit 3")
    func advertsNotForThisLink() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (relayURL, links) = try await registerLinked(lab)
        let desktopPort = try EndToEndLab.closedPort(udp: true)
        let corrupter = try AdvertCorrupter(forwardingTo: desktopPort)
        defer { corrupter.stop() }
        let listener = try lab.start(
            "listener",
            ["phone", "--listen", "--relay", relayURL, "--proximity", "udp://127.0.0.1:\(corrupter.port)", "--count", "1",
             "--listen-timeout", "60"])
        defer { listener.terminate() }
        // Listening before the desktop contacts it, so the desktop's 3 s go to the advert wait.
        try await listener.untilListening()
        let signIn = try lab.start(
            "linked",
            ["desktop", "--request", "ga", "--linked", "any", "--relay", relayURL, "--proximity-port", "\(desktopPort)",
             "--timeout", "3"])
        #expect(try await signIn.waitForExit(timeout: .seconds(30)) == 3, "\(signIn.transcript)\n\(listener.transcript)")
        let line = FailureOutput.singleErrorLine(signIn)
        #expect(line.hasPrefix("error: the linked phone did not come near within 3 s: "), "\(line)")
        #expect(line.contains(" ignored: ") && line.hasSuffix(" not for this link"), "\(line)")
        #expect(corrupter.forwarded > 0)
        #expect(try LinkStore.load(path: links).links.count == 1, "a phone that did not come near keeps its link")
    }
}

/// Forwards the proximity datagrams sent to ``port`` to a desktop's scanner with the last byte of
/// the advert's tag flipped, so none authenticates: the scanner counts them as not its session's.
private final class AdvertCorrupter: Sendable {
    let port: Int
    private let fd: CInt
    private let state = Mutex((stopped: false, forwarded: 0))

    var forwarded: Int { state.withLock { $0.forwarded } }

    init(forwardingTo target: Int) throws {
        (fd, port) = try EndToEndLab.boundSocket(udp: true, listening: false)
        var wait = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        let thread = Thread { [self] in
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(target).bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var buffer = [UInt8](repeating: 0, count: 64)
            while !state.withLock({ $0.stopped }) {
                let count = recv(fd, &buffer, buffer.count, 0)
                guard count == ProximityDatagram.size else { continue }
                buffer[count - 1] ^= 0x01
                let sent = withUnsafePointer(to: &address) { pointer in
                    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        sendto(fd, buffer, count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
                if sent == count { state.withLock { $0.forwarded += 1 } }
            }
            close(fd)
        }
        thread.start()
    }

    func stop() { state.withLock { $0.stopped = true } }
}

/// Starts a relay and registers alice by QR code with `--link` through it; returns the relay's URL
/// and the desktop's links file.
func registerLinked(_ lab: EndToEndLab) async throws -> (relayURL: String, links: String) {
    let (_, relayURL) = try await lab.startRelay()
    let desktop = try await lab.startDesktop(["--request", "mc", "--link", "--relay", relayURL])
    let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url])
    #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)\n\(phone.transcript)")
    #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")
    return (relayURL, lab.file("links.json"))
}

/// The permission bits of a file.
private func linkedFileMode(_ path: String) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    return (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
}

extension EndToEndLab {
    /// Starts `phone --listen --relay RELAY --proximity udp://127.0.0.1:PORT EXTRA` and returns once
    /// its push channel is open (``ChildProcess/untilListening()``).
    func startListener(_ name: String, relayURL: String, proximityPort: Int, _ extra: [String] = []) async throws -> ChildProcess {
        let listener = try start(name, ["phone", "--listen", "--relay", relayURL, "--proximity", "udp://127.0.0.1:\(proximityPort)"] + extra)
        try await listener.untilListening()
        return listener
    }
}

extension ChildProcess {
    /// Waits until this `phone --listen` has its push channel open (and so has announced its revoked
    /// contact IDs): a desktop started before then has only the relay's 3 s contact wait for the
    /// phone to start up and connect, which a loaded machine can exceed (504, exit 6).
    func untilListening() async throws {
        _ = try await waitForOutput("push channel open", timeout: .seconds(20), in: \.standardError, untimed: true) { lines in
            lines.contains { $0.hasPrefix("push channel open") }
        }
    }
}


/// A loopback TCP server that answers every connection with the same bytes and closes it; with no
/// answer, one that never accepts (the kernel completes the connection; nobody reads or answers).
private final class FixedAnswerServer: @unchecked Sendable {
    let port: Int
    private let socket: Int32

    init?(answer: String?) {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(fd, address, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, address, &length) == 0
            }
        }
        guard bound else {
            close(fd)
            return nil
        }
        socket = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        guard let answer else { return }
        let bytes = Array(answer.utf8)
        Thread.detachNewThread {
            while true {
                let client = accept(fd, nil, nil)
                guard client >= 0 else { return }  // the listening socket was shut down
                var request = [UInt8](repeating: 0, count: 4096)
                _ = read(client, &request, request.count)
                _ = bytes.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
                close(client)
            }
        }
    }

    func stop() {
        shutdown(socket, Int32(SHUT_RDWR))
        close(socket)
    }
}
