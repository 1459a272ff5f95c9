import Foundation
import Testing

/// `hybrid-sim bench hostile` as a process, short and small: every attack runs against the relay it
/// starts, honest sign-ins all succeed, and each attack gets the answer the relay documents.
@Suite("End to end: bench hostile")
struct EndToEndHostileSoakTests {
    @Test("a 5-second soak with 48 attackers: honest sign-ins 100 %, documented refusals, descriptors back to baseline")
    func shortSoak() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let bench = try lab.start(
            "bench",
            [
                "bench", "hostile", "--duration", "5", "--hostile", "48", "--hold-min", "1", "--hold-max", "2",
                "--source-flood-burst", "40", "--settle", "20", "--json",
            ])
        #expect(try await bench.waitForExit(timeout: .seconds(90)) == 0, "\(bench.transcript)")
        let report = try #require(
            JSONSerialization.jsonObject(with: Data(bench.standardOutput.text.utf8)) as? [String: Any], "\(bench.transcript)")
        #expect((report["honestFailures"] as? [String: Int])?.isEmpty == true, "\(bench.transcript)")
        #expect((report["honestSignIns"] as? Int ?? 0) >= 1)
        #expect((report["problems"] as? [String])?.isEmpty == true)

        var outcomes: [String: [String: Int]] = [:]
        for attack in report["attacks"] as? [[String: Any]] ?? [] {
            if let name = attack["attack"] as? String { outcomes[name] = attack["outcomes"] as? [String: Int] ?? [:] }
        }
        #expect(outcomes.count == 15, "every attack ran: \(outcomes.keys.sorted())")
        // Answers the relay documents (Docs/RELAY.md), attack by attack.
        #expect(outcomes["unmasked-frame"]?["close 1002"] ?? 0 > 0, "\(outcomes)")
        #expect(outcomes["text-frame"]?["close 1003"] ?? 0 > 0, "\(outcomes)")
        #expect(outcomes["oversize-message"]?["close 1009"] ?? 0 > 0, "\(outcomes)")
        #expect(outcomes["connect-storm"]?["HTTP 404"] ?? 0 > 0, "\(outcomes)")
        #expect(outcomes["prejoin-flood"]?["close 1008"] ?? 0 > 0, "past the pre-join budget: \(outcomes)")
        #expect(outcomes["source-flood"]?["HTTP 429"] ?? 0 > 0, "beyond the per-source cap of 32: \(outcomes)")
        for (attack, figures) in outcomes {
            #expect(!figures.keys.contains { $0.hasPrefix("connect") }, "\(attack) could always connect: \(figures)")
        }

        let baseline = try #require(report["relayBaseline"] as? [String: Any])
        let end = try #require(report["relayEnd"] as? [String: Any])
        #expect((end["openFiles"] as? Int ?? .max) <= (baseline["openFiles"] as? Int ?? 0))
        #expect(bench.standardError.text.contains("started hybrid-sim relay"))
    }
    @Test("a soak whose honest sign-ins all fail (a --url where nothing listens): the report, then one error line naming the failed checks, exit 1")
    func failedSoak() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let url = "ws://127.0.0.1:\(try EndToEndLab.closedPort())"
        let bench = try lab.start(
            "bench", ["bench", "hostile", "--url", url, "--duration", "1", "--hostile", "4", "--hold-min", "1", "--hold-max", "1", "--settle", "2"])
        #expect(try await bench.waitForExit(timeout: .seconds(60)) == 1, "\(bench.transcript)")
        #expect(bench.standardOutput.text.contains("verdict: FAIL: "), "\(bench.transcript)")
        let last = try #require(bench.standardError.lines.last, "\(bench.transcript)")
        #expect(last.hasPrefix("error: bench hostile: ") && last.contains("check(s) failed: ") && last.contains("no honest sign-in completed"),
                "\(bench.transcript)")
    }
}
