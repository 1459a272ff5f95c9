import Foundation
import HybridCore
import HybridRuntime
import HybridSim
import Synchronization
import Testing

/// Linked phones under faults, with the real binary (one process per role and a separate `hybrid-sim
/// relay`): closes a relay sends after the phone answered, a link store damaged or put back while
/// the phone listens, a listener frozen while a desktop gave up, and a transaction the phone cannot
/// answer. The ceremonies themselves are in ``EndToEndLinkedTests``.
@Suite("End to end: linked phones under faults (processes)", .serialized)
struct EndToEndLinkedFaultTests {
    /// A hostile-peers review: a 4410 close after the phone had answered read as "the phone revoked
    /// this link", and the desktop removed a link the phone still held (it had just signed with it).
    @Test(
        "a 4410 close after the phone's advert (relay --fault close=4410@to-desktop#N: instead of its handshake message, of its response) is the tunnel's close: exit 6, the link kept",
        arguments: [1, 3])
    func revokedCloseAfterTheAdvert(message: Int) async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (_, links) = try await registerLinked(lab)
        let (faulty, faultyURL) = try await lab.startRelay(["--fault", "close=4410@to-desktop#\(message)"])
        defer { faulty.terminate() }
        let proximityPort = try EndToEndLab.closedPort(udp: true)
        let listener = try await lab.startListener("listener", relayURL: faultyURL, proximityPort: proximityPort)
        defer { listener.terminate() }
        let signIn = try lab.start(
            "linked",
            ["desktop", "--request", "ga", "--linked", "any", "--relay", faultyURL, "--proximity-port", "\(proximityPort)"])
        #expect(try await signIn.waitForExit(timeout: .seconds(40)) == 6, "\(signIn.transcript)\n\(listener.transcript)")
        let line = FailureOutput.singleErrorLine(signIn)
        #expect(!line.contains("revoked this link") && line.contains("4410"), "\(line)")
        #expect(signIn.standardError.lines.contains { $0.hasPrefix("advert accepted") }, "the phone had come near: \(signIn.transcript)")
        #expect(try LinkStore.load(path: links).links.count == 1, "the link is kept")
    }

    /// A long-running-listener soak: a phone woken after the desktop gave up said only "404 Not Found".
    @Test("a listener stopped while a desktop contacts it, woken after the desktop gave up: the failed join says the desktop left first; it keeps listening")
    func wokenAfterTheDesktopLeft() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (relayURL, _) = try await registerLinked(lab)
        let proximityPort = try EndToEndLab.closedPort(udp: true)
        let listener = try await lab.startListener("listener", relayURL: relayURL, proximityPort: proximityPort)
        defer { listener.terminate() }
        listener.signal(SIGSTOP)
        let signIn = try lab.start(
            "linked",
            ["desktop", "--request", "ga", "--linked", "any", "--relay", relayURL, "--proximity-port", "\(proximityPort)", "--timeout", "2"])
        let status = try await signIn.waitForExit(timeout: .seconds(30))
        listener.signal(SIGCONT)
        #expect(status == 3 || status == 6, "the desktop gave up: \(signIn.transcript)")
        _ = try await listener.waitForOutput("the failed join", timeout: .seconds(20), in: \.standardError, untimed: true) { lines in
            lines.contains {
                $0.hasPrefix("linked transaction failed: joining the desktop's tunnel: relay rejected /cable/connect: 404")
                    && $0.hasSuffix("the desktop gave up or left before this phone joined its tunnel (was this phone stopped or slow meanwhile?)")
            }
        }
        #expect(listener.isRunning, "\(listener.transcript)")
    }

    @Test("a linked transaction the phone cannot answer (two passkeys match, no --account): the listener's --json has an error event for it, and it keeps listening")
    func listenerReportsFailedTransaction() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (relayURL, _) = try await registerLinked(lab)
        let second = try await lab.startDesktop(["--request", "mc", "--user", "bob"])
        let scan = try lab.startPhone(for: second, ["--qr", second.url])
        #expect(try await second.process.waitForExit() == 0, "\(second.process.transcript)")
        #expect(try await scan.waitForExit() == 0, "\(scan.transcript)")

        let proximityPort = try EndToEndLab.closedPort(udp: true)
        let listener = try await lab.startListener("listener", relayURL: relayURL, proximityPort: proximityPort, ["--listen-timeout", "60", "--json"])
        defer { listener.terminate() }
        let signIn = try lab.start(
            "linked", ["desktop", "--request", "ga", "--linked", "any", "--relay", relayURL, "--proximity-port", "\(proximityPort)"])
        #expect(try await signIn.waitForExit(timeout: .seconds(40)) == 4, "\(signIn.transcript)\n\(listener.transcript)")
        let lines = try await listener.waitForOutput("an error event", timeout: .seconds(10)) { lines in
            lines.contains { $0.contains(#""event":"error""#) }
        }
        let error = try JSONEvents.parse(try #require(lines.first { $0.contains(#""event":"error""#) }))
        #expect((error["message"] as? String)?.hasSuffix("choose one with --account NAME (the newest of a name is used)") == true, "\(error)")
        #expect(error["flow"] as? String == "linked")
        #expect(listener.isRunning, "the listener goes on after a failed transaction")
    }

    /// A long-running-listener soak: a link store put back from before an `--unlink` got the relay's
    /// 410 and exit 6, which a supervisor would retry for ever; and a store damaged while listening
    /// was refused as "unreadable" without saying which file or why.
    @Test("a link store from before --unlink: the relay's 410 ends --listen with exit 1 and the remedy; a store damaged while listening is named in the refusal")
    func revokedStoreAndDamagedStore() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (relayURL, _) = try await registerLinked(lab)
        let linkStore = lab.file(PhoneLinkStore.fileName)
        let proximityPort = try EndToEndLab.closedPort(udp: true)
        // Damaged while listening: the desktop is refused (exit 4), the phone's line says which file and why.
        let listener = try await lab.startListener("listener", relayURL: relayURL, proximityPort: proximityPort)
        defer { listener.terminate() }
        let good = try Data(contentsOf: URL(fileURLWithPath: linkStore))
        try Data("x".utf8).write(to: URL(fileURLWithPath: linkStore))
        let refused = try lab.start(
            "linked", ["desktop", "--request", "ga", "--linked", "any", "--relay", relayURL, "--proximity-port", "\(proximityPort)"])
        #expect(try await refused.waitForExit(timeout: .seconds(40)) == 4, "\(refused.transcript)\n\(listener.transcript)")
        #expect(FailureOutput.singleErrorLine(refused).contains("refused the contact request: the phone's link store is unreadable"))
        let line = try await listener.waitForOutput("the refusal", in: \.standardError, untimed: true) { lines in
            lines.contains { $0.hasPrefix("refused the contact request: the phone's link store is unreadable (\(linkStore): ") }
        }
        #expect(!line.isEmpty)
        #expect(!FailureOutput.singleErrorLine(refused).contains(linkStore), "the phone's path stays on the phone")
        // Removed while listening: refused as having no link identity, the line saying what to do.
        try FileManager.default.removeItem(atPath: linkStore)
        let missing = try lab.start(
            "linked-missing", ["desktop", "--request", "ga", "--linked", "any", "--relay", relayURL, "--proximity-port", "\(proximityPort)"])
        #expect(try await missing.waitForExit(timeout: .seconds(40)) == 4, "\(missing.transcript)\n\(listener.transcript)")
        #expect(FailureOutput.singleErrorLine(missing).contains("refused the contact request: the phone has no link identity"))
        _ = try await listener.waitForOutput("the missing store", in: \.standardError, untimed: true) { lines in
            lines.contains("refused the contact request: the phone has no link identity (\(linkStore) is gone or holds none: "
                + "restore it, or link desktops again by QR code)")
        }
        listener.signal(SIGINT)
        #expect(try await listener.waitForExit(timeout: .seconds(10)) == 0, "\(listener.transcript)")

        // --unlink on a damaged link store: exit 2, with --json the error event last on stdout (a scripting review: none).
        try Data("x".utf8).write(to: URL(fileURLWithPath: linkStore))
        let damagedUnlink = try lab.start("unlink-damaged", ["phone", "--unlink", "--json"])
        #expect(try await damagedUnlink.waitForExit() == 2, "\(damagedUnlink.transcript)")
        let errorEvent = try JSONEvents.parse(try #require(damagedUnlink.standardOutput.lines.last))
        #expect(errorEvent["event"] as? String == "error" && errorEvent["flow"] as? String == "linked"
            && errorEvent["kind"] as? String == "badInput" && errorEvent["exitCode"] as? Int == 2, "\(damagedUnlink.transcript)")
        #expect(FailureOutput.singleErrorLine(damagedUnlink).hasPrefix("error: cannot use the phone's link store: \(linkStore)"))

        // Interrupted while it tells a relay that never answers: the signal's line, saying the revocation was saved.
        try good.write(to: URL(fileURLWithPath: linkStore))
        let (silent, silentPort) = try EndToEndLab.boundSocket(listening: true)
        defer { close(silent) }
        let interrupted = try lab.start("unlink-interrupted", ["phone", "--unlink", "--relay", "ws://127.0.0.1:\(silentPort)", "--json"])
        _ = try await interrupted.waitForOutput("the revocation", in: \.standardError, untimed: true) { lines in
            lines.contains { $0.hasPrefix("revoked the contact ID") }
        }
        interrupted.signal(SIGINT)
        #expect(try await interrupted.waitForExit(timeout: .seconds(10)) == 130, "\(interrupted.transcript)")
        #expect(FailureOutput.singleErrorLine(interrupted)
            == "error: interrupted by SIGINT (the revocation was saved; the relay learns it from this phone's next --listen)")
        let interruptedEvent = try JSONEvents.parse(try #require(interrupted.standardOutput.lines.last))
        #expect(interruptedEvent["kind"] as? String == "interrupted" && interruptedEvent["flow"] as? String == "linked")

        // Put back from before an --unlink that told the relay: 410 for good, exit 1 with the remedy.
        try good.write(to: URL(fileURLWithPath: linkStore))
        let unlink = try lab.start("unlink", ["phone", "--unlink", "--relay", relayURL])
        #expect(try await unlink.waitForExit() == 0, "\(unlink.transcript)")
        try good.write(to: URL(fileURLWithPath: linkStore))
        let stale = try lab.start("stale", ["phone", "--listen", "--relay", relayURL, "--proximity", "udp://127.0.0.1:\(proximityPort)"])
        #expect(try await stale.waitForExit(timeout: .seconds(20)) == 1, "\(stale.transcript)")
        let error = FailureOutput.singleErrorLine(stale)
        #expect(error.hasPrefix("error: relay rejected /cable/listen: 410 Gone") && error.contains("holds an identity from before a `phone --unlink`")
            && error.hasSuffix("run `hybrid-sim phone --unlink` to make a new contact ID, then link desktops again by QR code"), "\(error)")
    }

    /// A walkthrough: a damaged passkey store let --listen start and then refuse every contact, and
    /// the refusal sent to the desktop held the phone's path and error.
    @Test("phone --listen with a damaged passkey store: exit 2 at start; damaged while it listens, the desktop's refusal is generic and the path stays on the phone")
    func damagedPasskeyStore() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (relayURL, _) = try await registerLinked(lab)
        let passkeys = lab.file(PasskeyStore.fileName)
        let good = try Data(contentsOf: URL(fileURLWithPath: passkeys))
        let damaged = Data("{garbage".utf8)
        let proximityPort = try EndToEndLab.closedPort(udp: true)
        try damaged.write(to: URL(fileURLWithPath: passkeys))
        let atStart = try lab.start(
            "listener-damaged", ["phone", "--listen", "--relay", relayURL, "--proximity", "udp://127.0.0.1:\(proximityPort)"])
        #expect(try await atStart.waitForExit(timeout: .seconds(20)) == 2, "\(atStart.transcript)")
        let error = FailureOutput.singleErrorLine(atStart)
        #expect(error.hasPrefix("error: cannot use the passkey store: \(passkeys): not JSON"), "\(error)")
        #expect(error.hasSuffix("(the file is left as it is: fix it, or move it aside to start a new one)"), "\(error)")
        #expect(!atStart.standardError.text.contains("push channel open"), "\(atStart.transcript)")

        try good.write(to: URL(fileURLWithPath: passkeys))
        let listener = try await lab.startListener("listener", relayURL: relayURL, proximityPort: proximityPort)
        defer { listener.terminate() }
        try damaged.write(to: URL(fileURLWithPath: passkeys))
        let refused = try lab.start(
            "linked", ["desktop", "--request", "ga", "--linked", "any", "--relay", relayURL, "--proximity-port", "\(proximityPort)"])
        #expect(try await refused.waitForExit(timeout: .seconds(40)) == 4, "\(refused.transcript)\n\(listener.transcript)")
        let line = FailureOutput.singleErrorLine(refused)
        #expect(line.contains("refused the contact request: the phone's passkey store is unusable"), "\(line)")
        #expect(!line.contains(passkeys) && !line.contains("not JSON"), "the phone's path and error stay on the phone: \(line)")
        _ = try await listener.waitForOutput("the refusal", in: \.standardError, untimed: true) { lines in
            lines.contains { $0.contains("refused the contact request: the phone's passkey store is unusable (\(passkeys): not JSON") }
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: passkeys)) == damaged, "the file is left as it is")
    }

    /// A walkthrough: a save failure said what was wrong with the file but not, as every other
    /// error about a damaged store does, that the file is left as it is and what to do.
    @Test(
        "a links file or relying-party store damaged between the desktop's start and its save: exit 1, the line says the file is left as it is",
        arguments: [("links.json", "links file"), ("rp-credentials.json", "relying-party store")])
    func damagedBeforeTheSave(file: String, what: String) async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (_, relayURL) = try await lab.startRelay()
        let desktop = try await lab.startDesktop(["--request", "mc", "--link", "--relay", relayURL])
        let path = lab.file(file)
        let damaged = #"{"version":1,"links":"x","credentials":"x"}"#
        try damaged.write(toFile: path, atomically: true, encoding: .utf8)
        let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url])
        #expect(try await desktop.process.waitForExit() == 1, "\(desktop.process.transcript)\n\(phone.transcript)")
        _ = try await phone.waitForExit()
        let line = FailureOutput.singleErrorLine(desktop.process)
        let key = file == "links.json" ? "links" : "credentials"
        #expect(
            line == "error: verified, but cannot save the \(what): \(path): not a store document: \"\(key)\" is not an array "
                + "(the file is left as it is: fix it, or move it aside to start a new one)", "\(line)")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == damaged)
    }
}
