@testable import HybridRuntime
import Testing

/// The hostile soak's verdict and its per-connection labels, without sockets: every way the soak
/// can fail (honest failures, none completed, descriptors or memory not back, memory over its
/// bound) and every label an attacker's connection can end with.
@Suite("Hostile soak: verdict and outcome labels")
struct HostileSoakVerdictTests {
    static let mib = 1024 * 1024

    static func sample(rss: Int, files: Int) -> ProcessProbe.Sample {
        ProcessProbe.Sample(cpuSeconds: 1, residentBytes: rss, openFiles: files, threads: 4)
    }

    /// A report that passes: honest sign-ins, the relay back at its baseline, under its bounds.
    static func passing() -> HostileSoakReport {
        var report = HostileSoakReport(
            configuration: HostileSoak.Configuration(host: "127.0.0.1", port: 1, duration: .seconds(1), hostile: 1))
        report.honestSignIns = 10
        report.relayBaseline = sample(rss: 30 * mib, files: 16)
        report.relayEnd = sample(rss: 40 * mib, files: 16)
        report.relayPeakResidentBytes = 90 * mib
        return report
    }

    @Test("a clean run passes")
    func clean() {
        var report = Self.passing()
        report.check()
        #expect(report.passed, "\(report.problems)")
    }

    @Test(
        "each bound, broken alone, fails the run with its own reason",
        arguments: [
            ("honest failure", "1 honest ceremony failed"),
            ("no sign-in", "no honest sign-in completed"),
            ("descriptors", "relay descriptors at 17 after the settle time, baseline 16"),
            ("rss growth", "more than 16.0 MiB above its baseline"),
            ("rss peak", "relay RSS peaked at"),
        ])
    func failures(case name: String, reason: String) {
        var report = Self.passing()
        switch name {
        case "honest failure": report.honestFailures = ["timeout": 1]
        case "no sign-in": report.honestSignIns = 0
        case "descriptors": report.relayEnd = Self.sample(rss: 40 * Self.mib, files: 17)
        case "rss growth": report.relayEnd = Self.sample(rss: 30 * Self.mib + 16 * Self.mib + 1, files: 16)
        default: report.relayPeakResidentBytes = report.maxRSSBytes + 1
        }
        report.check()
        #expect(!report.passed)
        #expect(report.problems.count == 1, "\(report.problems)")
        #expect(report.problems.first?.contains(reason) == true, "\(report.problems)")
    }

    @Test("how an attacker's connection ended: close code, HTTP status, EOF, reset, nothing")
    func outcomes() {
        let refused = Array("HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\n\r\n".utf8)
        let switched = Array("HTTP/1.1 101 Switching Protocols\r\n\r\n".utf8)
        let closeFrame: [UInt8] = [0x88, 0x02, 0x03, 0xEA]  // close 1002
        #expect(HostileAttempt.outcome(refused, .eof, upgraded: false) == "HTTP 429")
        #expect(HostileAttempt.outcome(switched + closeFrame, .eof, upgraded: true) == "close 1002")
        #expect(HostileAttempt.outcome(switched, .eof, upgraded: true) == "dropped (EOF)")
        #expect(HostileAttempt.outcome([], .eof, upgraded: false) == "dropped (EOF)")
        #expect(HostileAttempt.outcome(Array("HTTP/1.1 4".utf8), .eof, upgraded: false) == "dropped (EOF, partial answer)")
        #expect(HostileAttempt.outcome([], .reset, upgraded: false) == "dropped (reset)")
        #expect(HostileAttempt.outcome([], nil, upgraded: false) == "no answer in time")
        #expect(HostileAttempt.outcome(switched, nil, upgraded: true) == "no close frame in time")
    }
}
