import CTAP2
import Foundation
import HybridCore
import HybridRuntime
import HybridSim
import HybridTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Failure paths with the real binary: each ends within its timeout with a documented non-zero
/// exit status and exactly one `error:` line on stderr, as the last line (bad input, from damaged
/// stores to options a browser would refuse: ``EndToEndInputFailureTests``).
@Suite("End to end: failures (processes)", .serialized)
struct EndToEndFailureTests {
    @Test("phone --deny: both exit 4; the desktop names the refused request and the CTAP2 status")
    func deny() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let desktop = try await lab.startDesktop(["--request", "mc", "--timeout", "10"])
        let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url, "--deny"])
        #expect(try await desktop.process.waitForExit() == 4, "\(desktop.process.transcript)")
        #expect(try await phone.waitForExit() == 4, "\(phone.transcript)")
        #expect(
            FailureOutput.singleErrorLine(desktop.process)
                == "error: the phone refused the makeCredential request: CTAP2_ERR_OPERATION_DENIED (the user said no)"
        )
        #expect(
            FailureOutput.singleErrorLine(phone)
                == "error: refused the makeCredential request from example.com (--deny): answered CTAP2_ERR_OPERATION_DENIED"
        )
        #expect(!FileManager.default.fileExists(atPath: lab.passkeyStore), "nothing created")
        #expect(!FileManager.default.fileExists(atPath: lab.relyingPartyStore), "nothing registered")
    }

    @Test("sign-in with a phone that has no passkey for the site: both exit 4")
    func noPasskey() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let desktop = try await lab.startDesktop(["--request", "ga", "--timeout", "10"])
        #expect(
            desktop.process.standardError.lines.contains {
                $0.hasPrefix("note: ") && $0.contains("no credential for example.com")
            }
        )
        let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url])
        #expect(try await desktop.process.waitForExit() == 4, "\(desktop.process.transcript)")
        #expect(try await phone.waitForExit() == 4, "\(phone.transcript)")
        #expect(
            FailureOutput.singleErrorLine(desktop.process)
                == "error: the phone has no passkey for example.com (CTAP2_ERR_NO_CREDENTIALS)"
        )
        #expect(FailureOutput.singleErrorLine(phone).hasPrefix("error: no passkey for example.com on this phone"))
    }

    @Test("a passkey the relying party's store does not hold: exit 5, saying to register when the store has none for the site, and what else it may be when it has others")
    func unknownCredential() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let other = lab.file("other-rp.json")
        for (user, store) in [("alice", lab.relyingPartyStore), ("bob", other)] {
            let desktop = try await lab.startDesktop(["--request", "mc", "--user", user, "--rp-store", store])
            let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url])
            #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)")
            #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")
        }
        for (store, count, why) in [
            (other, 1, "none with this ID: the passkey was registered with another store, or the phone sent a wrong credential ID"),
            (lab.file("empty-rp.json"), 0, "register with --request mc first"),
        ] {
            let desktop = try await lab.startDesktop(["--request", "ga", "--rp-store", store])
            let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url, "--account", "alice"])
            #expect(try await desktop.process.waitForExit() == 5, "\(desktop.process.transcript)")
            _ = try await phone.waitForExit()
            let line = FailureOutput.singleErrorLine(desktop.process)
            #expect(line.hasPrefix("error: the relying party does not know credential "), "\(line)")
            #expect(line.hasSuffix("(\(store) has \(count) credential(s) for example.com; \(why))"), "\(line)")
        }
    }

    @Test("phone too far (--rssi -90): the desktop gives up after --timeout with the proximity counters, exit 3")
    func tooFar() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let started = ContinuousClock.now
        // 8 s: the phone, started after the desktop, must start up and advertise within it, which
        // a loaded machine can make slow (3 s was not always enough).
        let desktop = try await lab.startDesktop(["--request", "mc", "--timeout", "8"])
        let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url, "--rssi", "-90", "--timeout", "10"])
        #expect(try await desktop.process.waitForExit(timeout: .seconds(20)) == 3, "\(desktop.process.transcript)")
        #expect(ContinuousClock.now - started < .seconds(17))
        let error = FailureOutput.singleErrorLine(desktop.process)
        #expect(error.hasPrefix("error: no nearby authenticator within 8 s:"), "\(error)")
        #expect(error.contains("adverts ignored: ") && error.hasSuffix("too far (strongest -90 dBm < -70)"), "\(error)")
        // The phone loses its tunnel when the desktop's embedded relay goes away.
        #expect(try await phone.waitForExit(timeout: .seconds(15)) != 0)
        FailureOutput.singleErrorLine(phone)
    }

    /// CONTRACT: "Everything else is ignored and counted". An advert that authenticates under the
    /// QR code's key but has a non-zero reserved byte or an unknown domain used to end the desktop
    /// with exit 7; Chromium's `eid::Decrypt` gives nothing for it and the scan goes on.
    @Test("adverts for this QR code with an invalid plaintext are ignored: the timeout names them; a good phone after them signs in")
    func invalidAdvertsIgnored() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let lonely = try await lab.startDesktop(["--request", "mc", "--timeout", "2"])
        try Self.sendInvalidAdverts(for: lonely)
        #expect(try await lonely.process.waitForExit(timeout: .seconds(12)) == 3, "\(lonely.process.transcript)")
        #expect(
            FailureOutput.singleErrorLine(lonely.process)
                == "error: no nearby authenticator within 2 s: 2 adverts ignored: "
                + "2 for this QR code but invalid (first: reserved byte of the EID is not zero)")

        let desktop = try await lab.startDesktop(["--request", "mc"], json: true)
        try Self.sendInvalidAdverts(for: desktop)
        let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url])
        #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)")
        #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")
        let advert = try #require(try JSONEvents.all(desktop.process).first { $0["event"] as? String == "advert" })
        #expect((advert["ignored"] as? Int ?? 0) >= 2, "\(advert)")
    }

    /// Sends `desktop`'s scanner two adverts made with its QR code's key: one with reserved byte 1,
    /// one naming the assigned but unknown domain 2.
    private static func sendInvalidAdverts(for desktop: EndToEndLab.Desktop) throws {
        let cipher = AdvertCipher(eidKey: QRSecretKeys(qrSecret: try QRPayload(url: desktop.url).secret).eidKey)
        let body: [UInt8] = Array(repeating: 0x42, count: 10) + [0x0A, 0x0B, 0x0C]
        let port = try #require(desktop.proximityURL.split(separator: ":").last.flatMap { UInt16($0) })
        let socket = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        try #require(socket >= 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        for plaintext in [[0x01] + body + [0, 0], [0x00] + body + [2, 0]] {
            let datagram = try ProximityDatagram(rssi: -45, advert: cipher.encrypt(plaintext: plaintext)).bytes
            let sent = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(socket, datagram, datagram.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            try #require(sent == datagram.count)
        }
    }

    @Test("no phone at all: the desktop times out, exit 3")
    func desktopTimeout() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let desktop = try await lab.startDesktop(["--timeout", "2"])
        #expect(try await desktop.process.waitForExit(timeout: .seconds(12)) == 3, "\(desktop.process.transcript)")
        #expect(
            FailureOutput.singleErrorLine(desktop.process)
                == "error: no nearby authenticator within 2 s: no advert arrived at \(desktop.proximityURL) "
                + "(is `hybrid-sim phone` running with --proximity \(desktop.proximityURL)?)"
        )
    }

    /// "is `hybrid-sim phone` running?" was the guess even when the embedded relay had seen the
    /// phone open its tunnel.
    @Test("a phone that opened its tunnel at the embedded relay but advertises elsewhere: the timeout says what the relay saw, exit 3")
    func tunnelOpenedAdvertElsewhere() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let elsewhere = try EndToEndLab.boundSocket(udp: true, listening: false)  // takes the adverts, tells nobody
        defer { close(elsewhere.fd) }
        let desktop = try await lab.startDesktop(["--request", "mc", "--timeout", "12"])
        let phone = try lab.start(
            "phone",
            ["phone", "--qr", desktop.url, "--relay", desktop.relayURL, "--proximity", "udp://127.0.0.1:\(elsewhere.port)", "--timeout", "20"])
        defer { phone.terminate() }
        #expect(try await desktop.process.waitForExit(timeout: .seconds(30)) == 3, "\(desktop.process.transcript)\n\(phone.transcript)")
        #expect(
            FailureOutput.singleErrorLine(desktop.process)
                == "error: no nearby authenticator within 12 s: no advert arrived at \(desktop.proximityURL), but during the wait the embedded "
                + "relay \(desktop.relayURL) had 1 tunnel(s) opened (/cable/new, as a phone does before it advertises): that phone's adverts "
                + "went elsewhere, or it stopped before it sent one (was it given --proximity \(desktop.proximityURL)? its output says why)",
            "\(phone.transcript)")
    }

    @Test("a request the embedded relay refused during a wait without adverts: the timeout names its status, exit 3")
    func refusedRequestNamed() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        // A wait long enough for the refused request on a loaded machine.
        let desktop = try await lab.startDesktop(["--timeout", "8"])
        let path = TunnelServicePath.connect(routingID: [1, 2, 3], tunnelID: [UInt8](repeating: 8, count: 16)).path
        await #expect(throws: (any Error).self) { _ = try await WebSocketTunnel.open(url: desktop.relayURL + path) }
        #expect(try await desktop.process.waitForExit(timeout: .seconds(20)) == 3, "\(desktop.process.transcript)")
        #expect(
            FailureOutput.singleErrorLine(desktop.process)
                == "error: no nearby authenticator within 8 s: no advert arrived at \(desktop.proximityURL), but during the wait the embedded "
                + "relay \(desktop.relayURL) refused 1 request(s) (HTTP 404 ×1): a phone that could not open its tunnel there says why in its output")
    }

    @Test("relay not running: the phone cannot create its tunnel, exit 6")
    func relayNotRunning() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let port = try EndToEndLab.closedPort()
        let url = ClientSession(requestType: .makeCredential, timestamp: 0).url
        let phone = try lab.start(
            "phone",
            [
                "phone", "--qr", url, "--relay", "ws://127.0.0.1:\(port)", "--proximity", "udp://127.0.0.1:\(port)",
                "--timeout", "5",
            ]
        )
        #expect(try await phone.waitForExit(timeout: .seconds(15)) == 6, "\(phone.transcript)")
        let error = FailureOutput.singleErrorLine(phone)
        #expect(
            error.hasPrefix(
                "error: cannot reach the relay at ws://127.0.0.1:\(port) (creating the tunnel): connection refused"
            ),
            "\(error)"
        )
    }

    /// A long-running-listener soak: a relay stopped with SIGSTOP read as a bare "timed out".
    @Test("a relay that takes the connection and never answers the upgrade (stopped, overloaded): exit 3, saying so and naming it")
    func relayTakesConnectionSilently() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let silent = try EndToEndLab.boundSocket(listening: true)  // the kernel's backlog accepts; nobody answers
        defer { close(silent.fd) }
        let url = ClientSession(requestType: .makeCredential, timestamp: 0).url
        let relay = "ws://127.0.0.1:\(silent.port)"
        let phone = try lab.start("phone", ["phone", "--qr", url, "--relay", relay, "--proximity", "udp://127.0.0.1:\(silent.port)", "--timeout", "1"])
        #expect(try await phone.waitForExit(timeout: .seconds(15)) == 3, "\(phone.transcript)")
        #expect(FailureOutput.singleErrorLine(phone)
            == "error: creating the tunnel: WebSocket upgrade of /cable/new timed out after 1 s (the relay at \(relay) took the connection "
                + "but did not answer: stopped, or overloaded?)", "\(phone.transcript)")
    }

    @Test("--json failure: the last stdout line is an error event with the exit status")
    func jsonError() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let desktop = try await lab.startDesktop(["--timeout", "1"], json: true)
        #expect(try await desktop.process.waitForExit(timeout: .seconds(10)) == 3)
        let events = try JSONEvents.all(desktop.process)
        #expect(events.compactMap { $0["event"] as? String } == ["qr", "error"])
        #expect(events.last?["exitCode"] as? Int == 3)
        #expect(events.last?["kind"] as? String == "timeout")
        #expect((events.last?["message"] as? String)?.hasPrefix("no nearby authenticator within 1 s") == true)
        FailureOutput.singleErrorLine(desktop.process)
    }

    @Test("demo whose phone fails (a corrupt passkey store) ends at once with the phone's status, not at the desktop's timeout")
    func demoPhoneFails() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let home = lab.file("demo")
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        try "{garbage\n".write(toFile: home + "/passkeys.json", atomically: true, encoding: .utf8)
        let started = ContinuousClock.now
        let demo = try lab.start("demo", ["demo", "--home", home, "--timeout", "30"])
        #expect(try await demo.waitForExit(timeout: .seconds(40)) == 2, "\(demo.transcript)")
        #expect(ContinuousClock.now - started < .seconds(15), "the desktop's 30 s timeout was waited out")
        #expect(demo.standardError.text.contains("phone   │ error: cannot use the passkey store"), "\(demo.transcript)")
        #expect(
            FailureOutput.singleErrorLine(demo)
                == "error: registration failed: the phone exited 2 (its error is above), so the demo stopped the desktop"
        )
    }

    @Test("demo: its temporary stores (private keys) are removed at the end; --home keeps them; --home naming a file is exit 2")
    func demoStoresRemoved() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let temporary = lab.file("tmp")
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
        let demo = try lab.start("demo", ["demo", "--timeout", "30"], environment: ["TMPDIR": temporary])
        #expect(try await demo.waitForExit(timeout: .seconds(60)) == 0, "\(demo.transcript)")
        #expect(demo.standardError.text.contains("(removed at the end; --home DIR keeps them)"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary).filter { $0.hasPrefix("hybrid-sim-demo-") } == [])
        let file = lab.file("a-file")
        try "x".write(toFile: file, atomically: true, encoding: .utf8)
        try await FailureOutput.expect(
            lab, ["demo", "--home", file], status: 2, line: "error: cannot use the demo directory \(file): it is a file, not a directory")
    }

    @Test("demo: a TMPDIR that does not exist is said with the system's reason and what to change, exit 1, and is not made")
    func demoMissingTemporaryDirectory() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let missing = lab.file("no-such-tmp")
        let demo = try lab.start("demo", ["demo", "--timeout", "30"], environment: ["TMPDIR": missing])
        #expect(try await demo.waitForExit(timeout: .seconds(30)) == 1, "\(demo.transcript)")
        let line = try #require(demo.standardError.text.split(separator: "\n").first { $0.hasPrefix("error: ") }, "\(demo.transcript)")
        #expect(line.hasPrefix("error: cannot create the demo directory \(missing)/hybrid-sim-demo-"), "\(line)")
        #expect(
            line.hasSuffix(
                ": no such file or directory (in the temporary directory \(missing), from TMPDIR; set TMPDIR to a directory you can write, or give --home DIR)"),
            "\(line)")
        #expect(!FileManager.default.fileExists(atPath: missing), "the demo made the missing TMPDIR")
    }

    @Test("demo: the listening phone killed during the linked sign-ins stops the desktop at once; exit 1, and the line says it was killed")
    func demoLinkedPhoneKilled() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let started = ContinuousClock.now
        let demo = try lab.start("demo", ["demo", "--home", lab.file("demo"), "--timeout", "30"])
        try await demo.waitForOutput("the listening phone's start", timeout: .seconds(30), in: \.standardError) {
            $0.contains { $0.contains("starting hybrid-sim phone --listen") }
        }
        var phones: [Int32] = []
        let deadline = ContinuousClock.now + .seconds(5)
        while phones.isEmpty, ContinuousClock.now < deadline {
            phones = demo.children(withArgument: "--listen")
            if phones.isEmpty { try await Task.sleep(for: .milliseconds(5)) }
        }
        try #require(phones.count == 1, "the listening phone's process\n\(demo.transcript)")
        let killed = ContinuousClock.now
        kill(phones[0], SIGKILL)
        #expect(try await demo.waitForExit(timeout: .seconds(40)) == 1, "\(demo.transcript)")
        #expect(ContinuousClock.now - killed < .seconds(10), "the desktop's 30 s timeout was waited out")
        let line = FailureOutput.singleErrorLine(demo)
        #expect(
            line == "error: linked sign-in 1 failed: the listening phone was killed by signal 9 (SIGKILL), so the demo stopped the desktop"
                || line == "error: linked sign-in 2 failed: the listening phone was killed by signal 9 (SIGKILL), so the demo stopped the desktop",
            "\(demo.transcript)"
        )
        #expect(ContinuousClock.now - started < .seconds(60))
    }

    @Test(
        "relay on a port that is taken (exit 6, as rp and desktop), or on a host that is not loopback (64): one error line",
        arguments: [1, 2]
    )
    func relayCannotBind(eventLoops: Int) async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (holder, port) = try EndToEndLab.boundSocket(listening: true)
        defer { close(holder) }
        for (arguments, status, message) in [
            (["--port", "\(port)"], Int32(6), "error: relay could not bind 127.0.0.1:\(port): address already in use; give another --port, or 0 for a free one"),
            (["--host", "10.9.9.9"], Int32(64), "error: relay host 10.9.9.9 is not a loopback address (127.x.y.z written in full, ::1 or localhost); the relay binds loopback only"),
            (["--host", "127.0.0.1:47001"], Int32(64), "error: relay host 127.0.0.1:47001 carries a port: give the host alone (127.0.0.1) and the port with --port"),
        ] {
            try await FailureOutput.expect(lab, ["relay", "--event-loops", "\(eventLoops)"] + arguments, status: status, line: message)
        }
    }

    @Test("relay under an open-file limit that holds no tunnel (two connections): exit 1 at the start, not a relay that listens and refuses every tunnel's second connection")
    func relayWithoutRoomForATunnel() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit") else { return }
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        // A hard limit the relay cannot raise, with room for 1 connection beside its own 32 and 4
        // per event loop of the process (one per core, whatever --event-loops uses).
        let limit = 32 + 4 * DescriptorLimit.processEventLoops + 1
        let relay = try lab.startOther(
            "relay", ["prlimit", "--nofile=\(limit):\(limit)", try HybridSimBinary.url().path, "relay", "--port", "0"])
        #expect(try await relay.waitForExit() == 1, "\(relay.transcript)")
        let line = FailureOutput.singleErrorLine(relay)
        #expect(line.hasPrefix("error: the open-file limit (ulimit -n) is \(limit), which leaves room for 1 connection(s) "), "\(line)")
        #expect(
            line.hasSuffix("and a tunnel needs 2: raise the limit (ulimit -n 1024 holds \(DescriptorLimit.connectionsFitting(1024) / 2) tunnels)"),
            "\(line)")
        #expect(!relay.standardOutput.text.contains("ws://"), "it never said it listens: \(relay.transcript)")
    }

    @Test("rp, desktop --web and the desktop's proximity port taken: one error line with the system's reason, exit 6")
    func serverPortTaken() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (holder, port) = try EndToEndLab.boundSocket(listening: true)
        defer { close(holder) }
        for (arguments, message) in [
            (["rp", "--profile", "okta", "--port", "\(port)"], "error: cannot listen on 127.0.0.1:\(port): address already in use; give another --port, or 0 for a free one"),
            (["desktop", "--web", "--web-port", "\(port)"], "error: cannot serve the web page on 127.0.0.1:\(port): address already in use; give another --web-port, or 0 for a free one"),
        ] {
            try await FailureOutput.expect(lab, arguments, status: 6, line: message)
        }
        // Held only by a closed client connection in TIME-WAIT: the line says nothing listens, and why.
        let waiting = try #require(LoopbackSocket.portInTimeWait())
        for (arguments, prefix) in [
            (["rp", "--profile", "okta", "--port", "\(waiting)"], "error: cannot listen on 127.0.0.1:\(waiting): address already in use (nothing is listening there: "),
            (["desktop", "--web", "--web-port", "\(waiting)"], "error: cannot serve the web page on 127.0.0.1:\(waiting): address already in use (nothing is listening there: "),
        ] {
            let process = try lab.start(arguments[0], arguments)
            #expect(try await process.waitForExit() == 6, "\(process.transcript)")
            let line = FailureOutput.singleErrorLine(process)
            #expect(line.hasPrefix(prefix) && line.contains("TCP TIME-WAIT"), "\(line)")
        }
        let (udpHolder, udpPort) = try EndToEndLab.boundSocket(udp: true, listening: false)
        defer { close(udpHolder) }
        let desktop = try lab.start("desktop", ["desktop", "--proximity-port", "\(udpPort)", "--relay-port", "0"])
        #expect(try await desktop.waitForExit() == 6, "\(desktop.transcript)")
        #expect(
            FailureOutput.singleErrorLine(desktop)
                == "error: cannot start the proximity scanner on udp port \(udpPort): proximity scanner could not bind udp://127.0.0.1:\(udpPort): "
                + "address already in use; give another --proximity-port, or 0 for a free one"
        )
        // The relay's port likewise, with the flag that moves it.
        let (tcpHolder, tcpPort) = try EndToEndLab.boundSocket(udp: false, listening: true)
        defer { close(tcpHolder) }
        let relayTaken = try lab.start("desktop", ["desktop", "--relay-port", "\(tcpPort)", "--proximity-port", "0"])
        #expect(try await relayTaken.waitForExit() == 6, "\(relayTaken.transcript)")
        let line = FailureOutput.singleErrorLine(relayTaken)
        #expect(line.hasPrefix("error: cannot start the embedded relay on port \(tcpPort): relay could not bind 127.0.0.1:\(tcpPort): ")
            && line.hasSuffix("; give another --relay-port, or 0 for a free one"), "\(line)")
    }
}
