import Foundation
import HybridSim
import Testing

/// SIGINT and SIGTERM end `desktop` and `phone` like any failure: exit 128 + the signal, one final
/// `error:` line, and with `--json` an `error` event as the last stdout line.
@Suite("End to end: interrupted by a signal (processes)", .serialized)
struct EndToEndSignalTests {
    @Test("desktop --json waiting for a phone, SIGINT: exit 130, an interrupted error event last, one error line")
    func desktopInterrupted() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let desktop = try await lab.startDesktop(["--request", "mc", "--timeout", "30"], json: true)
        desktop.process.signal(SIGINT)
        #expect(try await desktop.process.waitForExit(timeout: .seconds(10)) == 130, "\(desktop.process.transcript)")
        #expect(FailureOutput.singleErrorLine(desktop.process) == "error: interrupted by SIGINT")
        let last = try #require(try JSONEvents.all(desktop.process).last)
        #expect(last["event"] as? String == "error")
        #expect(last["kind"] as? String == "interrupted")
        #expect(last["exitCode"] as? Int == 130)
    }

    @Test("phone waiting for a relay's upgrade answer, SIGTERM: exit 143 and one error line")
    func phoneTerminated() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let desktop = try await lab.startDesktop(["--request", "mc", "--timeout", "30"])
        // A relay that accepts the connection (the kernel's backlog) and never answers.
        let silent = try EndToEndLab.boundSocket(listening: true)
        defer { close(silent.fd) }
        let phone = try lab.start(
            "phone", ["phone", "--qr", desktop.url, "--relay", "ws://127.0.0.1:\(silent.port)", "--proximity", desktop.proximityURL])
        // Its handlers are in place before it says anything.
        _ = try await phone.waitForOutput("connecting", in: \.standardError) { $0.contains { $0.contains("connecting to relay") } }
        phone.signal(SIGTERM)
        #expect(try await phone.waitForExit(timeout: .seconds(10)) == 143, "\(phone.transcript)")
        #expect(FailureOutput.singleErrorLine(phone) == "error: interrupted by SIGTERM")
        desktop.process.terminate()
    }

    @Test("SIGHUP (the terminal closed) and SIGQUIT end the desktop like SIGINT: 129 / 131 and one error line, no crash report", arguments: [SIGHUP, SIGQUIT])
    func desktopHangUpAndQuit(signal: Int32) async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let desktop = try await lab.startDesktop(["--request", "mc", "--timeout", "30"])
        desktop.process.signal(signal)
        #expect(try await desktop.process.waitForExit(timeout: .seconds(10)) == 128 + signal, "\(desktop.process.transcript)")
        let name = signal == SIGHUP ? "SIGHUP" : "SIGQUIT"
        #expect(FailureOutput.singleErrorLine(desktop.process) == "error: interrupted by \(name)", "\(desktop.process.transcript)")
        #expect(!desktop.process.standardError.text.contains("Program crashed"), "\(desktop.process.transcript)")
    }

    @Test("a signal in a program's first milliseconds is not lost: the relay, signalled every 2 ms from 0 to 30 ms after its start, always ends")
    func earlySignals() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        // Every 2 ms through the first 30: the window the old `signal(SIG_IGN)` + dispatch source
        // left (a signal there was lost, in about 1 run of 20) lies in it.
        for delay in stride(from: 0, through: 30, by: 2) {
            let relay = try lab.start("relay", ["relay", "--port", "0"])
            try await Task.sleep(for: .milliseconds(delay))
            relay.signal(SIGTERM)
            // 0 when its handler took it, or killed by SIGTERM before it had one: either way it ends.
            let status = try await relay.waitForExit(timeout: .seconds(10))
            #expect([0, 15, 143].contains(status), "after \(delay) ms: \(relay.transcript)")
        }
    }

    @Test(
        "a command that routes no signal (qr scan, inspect, reading a stdin that stays open) ends by the signal's own default action",
        arguments: [(["qr", "scan", "-"], SIGINT), (["inspect", "-"], SIGTERM), (["qr", "scan", "--raw", "-"], SIGHUP)])
    func unroutedSignal(arguments: [String], signal: Int32) async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let reader = try lab.start(arguments.joined(separator: " "), arguments, standardInput: .held)
        // Past main's first line, where the handlers go in (a signal before it has its default
        // action anyway); the command then waits for its input.
        try await Task.sleep(for: .milliseconds(300))
        #expect(reader.isRunning, "\(reader.transcript)")
        reader.signal(signal)
        #expect(try await reader.waitForExit(timeout: .seconds(10)) == signal, "\(reader.transcript)")
        #expect(reader.endedBySignal, "exited instead of ending by the signal: \(reader.transcript)")
        #expect(reader.standardError.text.isEmpty, "\(reader.transcript)")
    }

    @Test("under nohup a relay keeps running through SIGHUP (an inherited SIG_IGN stays) and still stops on SIGTERM, exit 0")
    func nohupKeepsHangUpIgnored() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let binary = try HybridSimBinary.url().path
        // stdout is a pipe, so nohup leaves the output where it is.
        let relay = try lab.startOther("relay under nohup", ["nohup", binary, "relay", "--port", "0"])
        _ = try await relay.waitForOutput("ready line") { $0.contains { $0.contains("ws://") } }
        relay.signal(SIGHUP)
        try await Task.sleep(for: .milliseconds(300))
        #expect(relay.isRunning, "SIGHUP ended a relay started under nohup: \(relay.transcript)")
        relay.signal(SIGTERM)
        #expect(try await relay.waitForExit(timeout: .seconds(10)) == 0, "\(relay.transcript)")
    }

    @Test("a relay started with SIGUSR1 ignored keeps it ignored (no status line, still running), as SIGHUP under nohup")
    func statusSignalIgnoredOnEntry() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let binary = try HybridSimBinary.url().path
        let relay = try lab.startOther(
            "relay with SIGUSR1 ignored", ["sh", "-c", "trap '' USR1 && exec \"$0\" relay --port 0", binary])
        _ = try await relay.waitForOutput("ready line") { $0.contains { $0.contains("ws://") } }
        relay.signal(SIGUSR1)
        try await Task.sleep(for: .milliseconds(300))
        #expect(relay.isRunning, "\(relay.transcript)")
        #expect(!relay.standardError.lines.contains { $0.contains(" status: ") }, "\(relay.transcript)")
        relay.signal(SIGTERM)
        #expect(try await relay.waitForExit(timeout: .seconds(10)) == 0, "\(relay.transcript)")
    }

    @Test("bench relay failing while it measures (a --relay-pid that is gone): one error line and an error event, exit 1")
    func benchFailureEvent() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let gone = try lab.startOther("a process that ends", ["true"])
        _ = try await gone.waitForExit()
        let (holder, port) = try EndToEndLab.boundSocket(listening: true)
        defer { close(holder) }
        let bench = try lab.start(
            "bench relay", ["bench", "relay", "--url", "ws://127.0.0.1:\(port)", "--relay-pid", "\(gone.processIdentifier)",
                            "--tunnels", "1", "--rounds", "1", "--json"])
        #expect(try await bench.waitForExit() == 1, "\(bench.transcript)")
        let event = try #require(try JSONEvents.all(bench).last, "\(bench.transcript)")
        #expect(event["event"] as? String == "error" && event["kind"] as? String == "failed" && event["exitCode"] as? Int == 1)
        let message = try #require(event["message"] as? String)
        #expect(message.contains("cannot read /proc/\(gone.processIdentifier)/stat"), "\(message)")
        #expect(bench.standardError.lines.last == "error: \(message)", "\(bench.transcript)")
    }

    @Test("bench relay whose measured relay dies during the run: the error says how many tunnels had opened and what failed by then")
    func benchMeasuredRelayDies() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (relay, url) = try await lab.startRelay()
        let bench = try lab.start(
            "bench relay", ["bench", "relay", "--url", url, "--relay-pid", "\(relay.processIdentifier)",
                            "--tunnels", "20", "--rounds", "2", "--hold", "3"])
        _ = try await bench.waitForOutput("the hold", in: \.standardError) { lines in lines.contains { $0.contains("holding 20 tunnels") } }
        relay.signal(SIGKILL)
        #expect(try await bench.waitForExit(timeout: .seconds(30)) == 1, "\(bench.transcript)")
        let line = FailureOutput.singleErrorLine(bench)
        #expect(line.contains("the measured process \(relay.processIdentifier) ended during the run"), "\(line)")
        #expect(line.contains("by then 20 of 20 tunnel(s) had opened, failures: "), "\(line)")
    }

    @Test("bench relay interrupted stops the relay it started (its own process group: a terminal's Ctrl-C does not reach it)")
    func benchStopsItsRelay() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let bench = try lab.start("bench relay", ["bench", "relay", "--tunnels", "20", "--rounds", "2", "--hold", "60"])
        let lines = try await bench.waitForOutput("the relay's start", in: \.standardError) { lines in
            lines.contains { $0.contains("started hybrid-sim relay (pid ") }
        }
        let started = try #require(lines.first { $0.contains("started hybrid-sim relay (pid ") })
        let pid = try #require(EndToEndLab.word(after: "(pid ", in: started).flatMap { Int32($0.dropLast()) })
        bench.signal(SIGINT)
        #expect(try await bench.waitForExit(timeout: .seconds(10)) == 130, "\(bench.transcript)")
        #expect(bench.standardError.lines.last == "error: bench interrupted by SIGINT; stopped the relay it had started (pid \(pid))")
        #expect(kill(pid, 0) != 0, "the relay \(pid) still runs")
    }

    @Test("phone --listen --json, SIGINT (its normal stop): exit 0, the result event last, a line with the count")
    func listenerStopped() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (relay, url) = try await lab.startRelay()
        defer { relay.terminate() }
        let phone = try lab.start("phone", ["phone", "--listen", "--json", "--relay", url])
        _ = try await phone.waitForOutput("listening") { $0.contains { $0.contains("\"listening\"") } }
        phone.signal(SIGINT)
        #expect(try await phone.waitForExit(timeout: .seconds(10)) == 0, "\(phone.transcript)")
        #expect(phone.standardError.lines.last == "answered 0 contact request(s); stopped by SIGINT", "\(phone.transcript)")
        let last = try #require(try JSONEvents.all(phone).last)
        #expect(last["event"] as? String == "result")
        #expect(last["flow"] as? String == "linked")
        #expect(last["answered"] as? Int == 0)
    }
}
