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
