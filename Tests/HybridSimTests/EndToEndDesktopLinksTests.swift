import Foundation
import HybridSim
import Synchronization
import Testing

/// `desktop --list-links` and `desktop --forget NAME|all`: the desktop's side of its links, with no network.
@Suite("End to end: desktop --list-links and --forget")
struct EndToEndDesktopLinksTests {
    @Test("--list-links shows the link (text and --json); --forget NAME removes it with no network, after which --linked has nothing; an unknown name is exit 2 naming the links")
    func listAndForget() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (_, links) = try await registerLinked(lab)
        let listed = try lab.start("list", ["desktop", "--list-links"])
        #expect(try await listed.waitForExit() == 0, "\(listed.transcript)")
        let line = try #require(listed.standardOutput.lines.first, "\(listed.transcript)")
        #expect(line.hasPrefix("HybridSim phone: linked 20") && line.contains(", tunnel service 0 (cable.ua5v.com), contact ID "), "\(line)")
        let json = try lab.start("list-json", ["desktop", "--list-links", "--json"])
        #expect(try await json.waitForExit() == 0, "\(json.transcript)")
        let event = try JSONEvents.parse(try #require(json.standardOutput.lines.first))
        let entries = try #require(event["links"] as? [[String: Any]], "\(event)")
        #expect(event["event"] as? String == "links" && entries.count == 1 && entries.first?["name"] as? String == "HybridSim phone")
        #expect(entries.first?["tunnelDomain"] as? Int == 0 && (entries.first?["linkedAt"] as? Int ?? 0) > 1_700_000_000)

        let unknown = try lab.start("forget-unknown", ["desktop", "--forget", "Pixel"])
        #expect(try await unknown.waitForExit() == 2, "\(unknown.transcript)")
        #expect(FailureOutput.singleErrorLine(unknown).hasSuffix("no linked phone named \"Pixel\" in \(links) (links: \"HybridSim phone\")"))
        #expect(try LinkStore.load(path: links).links.count == 1)
        let forget = try lab.start("forget", ["desktop", "--forget", "HybridSim phone", "--json"])
        #expect(try await forget.waitForExit() == 0, "\(forget.transcript)")
        #expect(forget.standardOutput.lines == [#"{"event":"forgotten","names":["HybridSim phone"]}"#], "\(forget.transcript)")
        #expect(forget.standardError.lines.contains { $0.hasPrefix("forgot \"HybridSim phone\" (\(links)); the phone keeps its side") })
        #expect(try LinkStore.load(path: links).links.isEmpty)
        let nothing = try lab.start("linked-nothing", ["desktop", "--request", "ga", "--linked", "any"])
        #expect(try await nothing.waitForExit() == 2, "\(nothing.transcript)")
        #expect(FailureOutput.singleErrorLine(nothing).contains("no linked phone in \(links)"), "\(nothing.transcript)")
    }

    @Test("a damaged links file: --list-links and --forget say it as --link does (what the file is, and that it is left as it is), exit 2")
    func damagedLinksFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("links-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/links.json"
        try Data("{oops".utf8).write(to: URL(fileURLWithPath: path))
        for run in [
            { (output: ProgramOutput) in DesktopLinksProgram.list(path: path, json: false, output: output) },
            { (output: ProgramOutput) in DesktopLinksProgram.forget("all", path: path, json: false, output: output) },
        ] {
            let lines = Mutex<[String]>([])
            let status = run(ProgramOutput(standardOutput: { _ in }, standardError: { line in lines.withLock { $0.append(line) } }))
            let said = lines.withLock { $0 }
            #expect(status == 2, "\(said)")
            #expect(said.last?.hasPrefix("error: cannot use the links file: \(path): not JSON: ") == true, "\(said)")
            #expect(said.last?.hasSuffix(" (the file is left as it is: fix it, or move it aside to start a new one)") == true, "\(said)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data("{oops".utf8))
    }
}

/// A `--linked` desktop scans where the listening phone advertises, or nowhere: a listening phone
/// was started with its `--proximity`, so a free port in place of a taken one would leave its
/// adverts with whatever holds the port (found with another desktop waiting on 47002).
@Suite("End to end: a --linked desktop's proximity port", .serialized)
struct EndToEndLinkedProximityPortTests {
    @Test("the default udp port taken: a --linked desktop fails at once (exit 6) saying where the phone advertises, no free port instead")
    func defaultPortTaken() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (relayURL, links) = try await registerLinked(lab)
        // Hold 47002 (if something else holds it already, it is taken all the same).
        let holder = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        try #require(holder >= 0)
        defer { close(holder) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(ProgramDefaults.proximityPort).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(holder, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        let signIn = try lab.start("linked", ["desktop", "--request", "ga", "--linked", "any", "--relay", relayURL, "--timeout", "20"])
        #expect(try await signIn.waitForExit(timeout: .seconds(15)) == 6, "\(signIn.transcript)")
        let line = FailureOutput.singleErrorLine(signIn)
        #expect(line.hasPrefix("error: cannot start the proximity scanner on udp port \(ProgramDefaults.proximityPort): ")
                && line.contains("the listening phone advertises to the --proximity it was started with"), "\(line)")
        #expect(!signIn.standardError.text.contains("instead"), "no fallback port: \(signIn.transcript)")
        #expect(try LinkStore.load(path: links).links.count == 1, "the link is kept")
    }

    @Test("--linked with --proximity-port 0 is a usage error: the listening phone cannot know a port picked now")
    func freePortRefused() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let signIn = try lab.start("linked", ["desktop", "--linked", "any", "--relay", "ws://127.0.0.1:1", "--proximity-port", "0"])
        #expect(try await signIn.waitForExit(timeout: .seconds(15)) == ProgramFailure.usageExitCode, "\(signIn.transcript)")
        #expect(signIn.standardError.text.contains("--linked takes no --proximity-port 0"), "\(signIn.transcript)")
    }
}

/// A listening phone frozen while `phone --unlink` runs (SIGSTOP), with a desktop contacting it
/// meanwhile: on waking it refuses that push as revoked, so the desktop removes the link (exit 8)
/// instead of waiting out its timeout and keeping a revoked link (a soak found it 4 times in 6).
@Suite("End to end: a push for a contact ID revoked while the phone was frozen")
struct EndToEndFrozenUnlinkTests {
    @Test("frozen listener, --unlink, a linked sign-in, then SIGCONT: the desktop gets 4410 (exit 8) and removes the link")
    func frozenWhileUnlinked() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (relayURL, links) = try await registerLinked(lab)
        let proximityPort = try EndToEndLab.closedPort(udp: true)
        let listener = try await lab.startListener("listener", relayURL: relayURL, proximityPort: proximityPort, ["--listen-timeout", "60"])
        defer { listener.terminate() }
        listener.signal(SIGSTOP)
        defer { listener.signal(SIGCONT) }  // a stopped process would not end on the SIGTERM of the teardown
        let unlink = try lab.start("unlink", ["phone", "--unlink"])
        #expect(try await unlink.waitForExit() == 0, "\(unlink.transcript)")
        let signIn = try lab.start(
            "linked", ["desktop", "--request", "ga", "--linked", "any", "--relay", relayURL, "--proximity-port", "\(proximityPort)", "--timeout", "20"])
        try await Task.sleep(for: .milliseconds(1500))  // the relay has pushed it to the frozen phone
        listener.signal(SIGCONT)
        #expect(try await signIn.waitForExit(timeout: .seconds(30)) == 8, "\(signIn.transcript)\n\(listener.transcript)")
        #expect(try LinkStore.load(path: links).links.isEmpty, "\(signIn.transcript)")
    }
}
