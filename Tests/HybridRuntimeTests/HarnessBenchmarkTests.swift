import Foundation
import HybridRuntime
import Testing

@Suite("Harness benchmark (hybrid-sim bench)", .timeLimit(.minutes(1)))
struct HarnessBenchmarkTests {
    @Test("nearest-rank percentiles are measured values")
    func percentiles() {
        let hundred = LatencySummary(milliseconds: Array((1...100).map(Double.init).reversed()))
        #expect(hundred.count == 100)
        #expect(hundred.min == 1 && hundred.max == 100)
        #expect(hundred.p50 == 50)
        #expect(hundred.p90 == 90)
        #expect(hundred.p99 == 99)
        #expect(hundred.mean == 50.5)

        let three = LatencySummary(milliseconds: [3, 1, 2])
        #expect(three.p50 == 2)
        #expect(three.p99 == 3)
        let one = LatencySummary(samples: [.milliseconds(7)])
        #expect(one.p50 == 7 && one.p99 == 7 && one.min == 7)
        #expect(LatencySummary(milliseconds: []).p50 == 0)
    }

    @Test("a short run times every sign-in, splits it into phases and relates it to the crypto floor")
    func shortRun() async throws {
        let benchmark = SignInBenchmark(count: 3, warmup: 1)
        let done = LockedBox<[Int]>([])
        let result = try await benchmark.run(
            progress: { count in done.update { $0.append(count) } },
            between: { count in count >= 2 })
        #expect(done.value == [1, 2, 3])
        // Interleaved work after the 2nd and 3rd sign-in: one untimed sign-in before the 3rd, none
        // after the last.
        #expect(result.rewarmSignIns == 1)
        #expect(result.samples.count == 3)
        #expect(result.summary.count == 3)
        #expect(result.summary.min <= result.summary.p50 && result.summary.p50 <= result.summary.p99)
        #expect(result.summary.p99 <= result.summary.max)
        #expect(result.summary.min > 0)
        #expect(result.registrationMilliseconds > 0)
        #expect(result.phases.count == 6)
        // The phases cover each sign-in without overlap.
        let medians = result.phases.map(\.summary.p50)
        #expect(medians.allSatisfy { $0 >= 0 })
        #expect(result.phases.map(\.summary.max).reduce(0, +) >= result.summary.min)
        // The sign-in ends at the verified assertion, inside its transaction; the teardown after it
        // is measured (zero would mean the verification was timed at the end of the transaction).
        #expect(result.transaction.count == 3 && result.teardown.count == 3)
        #expect(result.teardown.min > 0)
        #expect(result.transaction.min >= result.summary.min && result.transaction.p50 >= result.summary.p50)

        let crypto = try CryptoFloor.measure(iterations: 5, rounds: 2)
        #expect(crypto.operations.map(\.kind) == CryptoFloor.OperationKind.allCases)
        #expect(crypto.operations.allSatisfy { $0.nanoseconds > 0 })
        #expect(crypto.operations.map(\.perSignIn).reduce(0, +) == 70)
        // A floor that a sign-in beats would mean a wrong operation count or a unit slip (ns vs ms).
        #expect(crypto.floorMilliseconds > 0.01 && crypto.floorMilliseconds < result.summary.p50)

        var sampler = try SocketFloor.Sampler(replicas: 3)
        defer { sampler.close() }
        try sampler.round()
        try sampler.round()
        let sockets = sampler.result
        #expect(sockets.count == 6)
        #expect(sockets.fastestMilliseconds > 0 && sockets.fastestMilliseconds <= sockets.milliseconds)
        // The sockets alone cannot cost more than a whole sign-in that uses them.
        #expect(sockets.milliseconds < result.summary.p50)

        let report = BenchmarkReport(signIn: result, crypto: crypto, sockets: sockets)
        #expect(report.text.contains("crypto floor + sockets"))
        #expect(report.p99Ratio >= report.ratio)
        // Every sign-in does at least the floor's crypto, and not ten thousand times more.
        #expect(report.ratio > 1 && report.ratio < 10_000, "ratio \(report.ratio)")
        #expect(report.text.contains("p50"))
        #expect(report.text.contains("crypto floor"))
        // The JSON is valid and carries the same ratio the text reports.
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(report.json.utf8)) as? [String: Any])
        let jsonRatio = try #require(json["ratio"] as? Double)
        #expect(abs(jsonRatio - report.ratio) < 1e-9)
        #expect(["debug", "release"].contains(report.machine.buildConfiguration))
        #expect(report.machine.logicalCPUs >= 1)
    }

    @Test("a socket floor whose listener is gone fails at once with the system's reason, not a hang")
    func socketFloorError() throws {
        var sampler = try SocketFloor.Sampler(replicas: 1)
        sampler.close()
        let start = ContinuousClock.now
        var thrown: RuntimeError?
        do {
            try sampler.round()
        } catch let error as RuntimeError {
            thrown = error
        }
        let error = try #require(thrown, "a round with the listener closed succeeded")
        #expect(error.code == .connectionFailed)
        #expect(error.reason.hasPrefix("socket floor: connect failed: "), "\(error.reason)")
        #expect(error.reason.contains("refused"), "the reason is connect's own errno: \(error.reason)")
        #expect(ContinuousClock.now - start < .seconds(1))
        #expect(sampler.result.count == 0)
    }
}
