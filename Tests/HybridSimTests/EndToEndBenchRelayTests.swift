import Foundation
import Testing

/// `hybrid-sim bench relay` as a process: against the relay it starts itself, and against an external
/// `hybrid-sim relay` found by its listening port.
@Suite("End to end: bench relay")
struct EndToEndBenchRelayTests {
    @Test("without --url it starts its own relay, measures it and exits 0")
    func ownRelay() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let bench = try lab.start("bench", ["bench", "relay", "--tunnels", "12", "--rounds", "3", "--json"])
        #expect(try await bench.waitForExit(timeout: .seconds(60)) == 0, "\(bench.transcript)")
        let report = try #require(
            JSONSerialization.jsonObject(with: Data(bench.standardOutput.text.utf8)) as? [String: Any])
        #expect(report["tunnelsOpened"] as? Int == 12)
        #expect(report["messagesRelayed"] as? Int == 72)
        #expect((report["failures"] as? [String: Int])?.isEmpty == true)
        #expect(report["relayMicrosecondsPerOpen"] is Double, "the spawned relay was measured")
        #expect((report["relayMicrosecondsPerClose"] as? Double).map { $0 >= 0 } == true, "closing measured too")
        #expect(report["relayAfterClose"] is [String: Any])
        #expect(bench.standardError.text.contains("started hybrid-sim relay"))
    }

    @Test("against an external relay with the default message limit: failed rounds reported, exit 1")
    func externalRelayLimit() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (_, url) = try await lab.startRelay()  // default: 16 messages per peer
        let bench = try lab.start("bench", ["bench", "relay", "--url", url, "--tunnels", "3", "--rounds", "20"])
        #expect(try await bench.waitForExit(timeout: .seconds(60)) == 1, "\(bench.transcript)")
        let output = bench.standardOutput.text
        #expect(output.contains("failures: closed 1008: 3"), "\(bench.transcript)")
        #expect(output.contains("relay process (from /proc):"), "found by its port: \(output)")
        // The report is the result; the last stderr line says the run failed, as every command's does.
        #expect(bench.standardError.lines.last == "error: bench relay: 3 of 3 tunnel(s) opened, 3 failure(s) (closed 1008 ×3)",
                "\(bench.transcript)")
    }

    @Test("one of the measured relays killed while the tunnels are held: the run fails with one error naming it, exit 1, no crash")
    func relayKilledMidRun() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (relay, url) = try await lab.startRelay()
        // A second "instance" of a cluster, measured with the first; it ends while every tunnel
        // through the first is still open.
        let other = try lab.startOther("a second measured process", ["sleep", "60"])
        let bench = try lab.start(
            "bench",
            ["bench", "relay", "--url", url, "--relay-pid", "\(relay.processIdentifier),\(other.processIdentifier)",
             "--tunnels", "20", "--rounds", "3", "--hold", "2"])
        _ = try await bench.waitForOutput("the hold", in: \.standardError) { $0.contains { $0.contains("holding 20 tunnels") } }
        kill(other.processIdentifier, SIGKILL)
        // It crashed here (exit 134: the rounds' handlers outlived their tunnels once the run failed).
        #expect(try await bench.waitForExit(timeout: .seconds(30)) == 1, "\(bench.transcript)")
        // The relay that carried the tunnels was not the one killed: they all opened and nothing failed.
        #expect(
            bench.standardError.lines.last
                == "error: the measured process \(other.processIdentifier) ended during the run (cannot read /proc/\(other.processIdentifier)/stat); "
                + "by then 20 of 20 tunnel(s) had opened, no failure",
            "\(bench.transcript)")
    }

    /// A bench that ends without stopping anything (SIGKILL, a crash, an allocation failure under
    /// `ulimit -v`) left its relay, whose timeouts are a day long, running as an orphan on its port.
    @Test("the bench killed with SIGKILL while it holds its tunnels: the relay it started stops too, within seconds")
    func relayEndsWithKilledBench() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let bench = try lab.start("bench", ["bench", "relay", "--tunnels", "4", "--rounds", "1", "--hold", "120"])
        let lines = try await bench.waitForOutput("the hold", in: \.standardError) { $0.contains { $0.contains("holding 4 tunnels") } }
        let started = try #require(lines.first { $0.contains("started hybrid-sim relay (pid ") })
        let relay = try #require(EndToEndLab.word(after: "(pid ", in: started).flatMap { Int32($0.filter(\.isNumber)) })
        #expect(bench.children(withArgument: "relay") == [relay])
        kill(bench.processIdentifier, SIGKILL)
        let deadline = ContinuousClock.now + .seconds(10)
        while Self.isRunning(relay), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        let orphan = Self.isRunning(relay)
        if orphan { kill(relay, SIGKILL) }  // not left behind by a failing run
        #expect(!orphan, "the relay (pid \(relay)) outlived its bench by 10 s\n\(bench.transcript)")
        _ = try await bench.waitForExit(timeout: .seconds(5))
        #expect(
            bench.standardError.text.contains(
                "relay: standard input ended (--end-with-stdin: the process that started this relay is gone); stopping"),
            "\(bench.transcript)")
    }

    /// Whether `pid` is a process that has not ended: gone, or a zombie nobody reaped yet, is not.
    private static func isRunning(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let afterName = stat.range(of: ") ", options: .backwards)
        else { return false }
        return !stat[afterName.upperBound...].hasPrefix("Z") && !stat[afterName.upperBound...].hasPrefix("X")
    }
}
