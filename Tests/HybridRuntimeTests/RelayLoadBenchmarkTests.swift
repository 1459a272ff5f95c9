import Foundation
import HybridCore
import HybridRuntime
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `RelayLoadBenchmark` (`hybrid-sim bench relay`) against an in-process relay, and `ProcessProbe`.
/// Small, bounded runs: they check the counts and the failure accounting, not speed.
@Suite("Relay load generator")
struct RelayLoadBenchmarkTests {
    private func configuration(
        _ endpoint: RelayEndpoint, tunnels: Int, rounds: Int, generator: RelayLoadBenchmark.Generator
    ) -> RelayLoadBenchmark.Configuration {
        var configuration = RelayLoadBenchmark.Configuration(
            host: endpoint.host, port: endpoint.port, tunnels: tunnels, rounds: rounds, relay: .current)
        configuration.openConcurrency = 8
        configuration.timeout = .seconds(10)
        configuration.generator = generator
        configuration.generatorThreads = 2
        return configuration
    }

    @Test("every tunnel opens, every round relays two messages, the relay ends with no tunnel", arguments: RelayLoadBenchmark.Generator.allCases)
    func cleanRun(generator: RelayLoadBenchmark.Generator) async throws {
        var relayConfiguration = RelayConfiguration()
        relayConfiguration.maxMessagesPerPeer = 64
        try await withRelay(relayConfiguration) { relay, endpoint in
            let report = try await RelayLoadBenchmark(configuration(endpoint, tunnels: 24, rounds: 5, generator: generator)).run()
            #expect(report.failures.isEmpty, "\(report.failures)")
            #expect(report.tunnelsOpened == 24)
            #expect(report.messagesRelayed == 24 * 5 * 2)
            #expect(report.roundTrips.count == 24 * 5)
            #expect(report.roundTrips.min > 0 && report.roundTrips.p50 <= report.roundTrips.p99)
            // The relay counted the same messages the generator did.
            #expect(relay.statistics.messagesRelayed == 24 * 5 * 2)
            #expect(relay.statistics.tunnelsJoined == 24)
            #expect(await eventually { relay.openTunnelCount == 0 })
            // This process is the relay here: the /proc figures exist and are plausible.
            let perMessage = try #require(report.relayMicrosecondsPerMessage)
            #expect(perMessage > 0)
            // Its kernel part (system time) is part of it, and the text gives both parts.
            let kernel = try #require(report.relayKernelMicrosecondsPerMessage)
            #expect(kernel >= 0 && kernel <= perMessage)
            #expect(report.text.contains("µs (kernel "))
            let before = try #require(report.relayBefore)
            let open = try #require(report.relayAfterOpen)
            #expect(open.openFiles >= before.openFiles + 24)
            #expect(report.text.contains("failures: 0"))
            let json = try #require(
                JSONSerialization.jsonObject(with: Data(report.json.utf8)) as? [String: Any])
            #expect(json["tunnelsOpened"] as? Int == 24)
            #expect(json["relayMicrosecondsPerMessage"] is Double)
            #expect(json["relayKernelMicrosecondsPerMessage"] is Double)
            #expect(json["generator"] as? String == generator.rawValue)
            #expect(json["generatorCoresUsedDuringRounds"] is Double)
            // Self-explaining, as the sign-in report is: when it ran and in what units.
            #expect((json["startedAt"] as? String)?.hasSuffix("Z") == true)
            #expect((json["units"] as? String)?.contains("roundTrips are in milliseconds") == true)
        }
    }

    @Test("tunnels beyond the relay's limit are counted as HTTP 503 failures, not hidden", arguments: RelayLoadBenchmark.Generator.allCases)
    func refusedOpens(generator: RelayLoadBenchmark.Generator) async throws {
        var relayConfiguration = RelayConfiguration()
        relayConfiguration.maxOpenTunnels = 5
        try await withRelay(relayConfiguration) { _, endpoint in
            let report = try await RelayLoadBenchmark(configuration(endpoint, tunnels: 9, rounds: 1, generator: generator)).run()
            #expect(report.tunnelsOpened == 5)
            #expect(report.failures == ["HTTP 503": 4])
            #expect(report.failureCount == 4)
            #expect(report.text.contains("HTTP 503: 4"))
        }
    }

    @Test("a relay that closes tunnels mid-run shows up as failed rounds with the close code", arguments: RelayLoadBenchmark.Generator.allCases)
    func closedDuringRounds(generator: RelayLoadBenchmark.Generator) async throws {
        var relayConfiguration = RelayConfiguration()
        relayConfiguration.maxMessagesPerPeer = 3  // the fourth ping closes the tunnel with 1008
        try await withRelay(relayConfiguration) { _, endpoint in
            let report = try await RelayLoadBenchmark(configuration(endpoint, tunnels: 4, rounds: 6, generator: generator)).run()
            #expect(report.tunnelsOpened == 4)
            #expect(report.roundTrips.count == 4 * 3)
            #expect(report.failures == ["closed 1008": 4], "\(report.failures)")
            // The first one is quoted with the relay's reason, which names the limit.
            let example = try #require(report.failureExamples["closed 1008"])
            // Both generators word it as the runtime's client does.
            #expect(example.hasPrefix("tunnel closed with 1008 (policy violation): more than 3 messages"), "\(example)")
            #expect(report.text.contains("first closed 1008: "), "\(report.text)")
            // A run this small rests on a few of /proc's clock ticks, and says so.
            #expect(report.text.contains("figures from fewer than 100 ticks are coarse"), "\(report.text)")
        }
    }

    @Test("a tunnel the relay closed while it was held is a failure with its close code, reported at once (not as a timeout)", arguments: RelayLoadBenchmark.Generator.allCases)
    func closedWhileHeld(generator: RelayLoadBenchmark.Generator) async throws {
        var relayConfiguration = RelayConfiguration()
        relayConfiguration.idleTimeout = .milliseconds(200)  // the hold outlasts it: closed with 1001
        try await withRelay(relayConfiguration) { _, endpoint in
            var bench = configuration(endpoint, tunnels: 3, rounds: 2, generator: generator)
            bench.hold = .milliseconds(800)
            bench.timeout = .seconds(20)
            let report = try await RelayLoadBenchmark(bench).run()
            #expect(report.tunnelsOpened == 3)
            #expect(report.failures == ["closed 1001": 3], "\(report.failures)")
            #expect(report.roundsSeconds < 10, "reported at once, not after the 20 s timeout")
        }
    }

    @Test(
        "a relay that selects no fido.cable, gives no routing ID or never answers: every open fails, by reason",
        arguments: RelayLoadBenchmark.Generator.allCases)
    func misbehavingRelay(generator: RelayLoadBenchmark.Generator) async throws {
        let cases: [(name: String, behaviour: FakeTunnelServer.Behaviour, failure: String)] = [
            ("no subprotocol", .upgrade(headers: [(HybridConstants.routingIDHeader, "ABCDEF")], frame: nil), "handshakeFailed"),
            (
                "no routing ID", .upgrade(headers: [("Sec-WebSocket-Protocol", HybridConstants.webSocketProtocol)], frame: nil),
                "handshakeFailed"
            ),
            ("silent", .silent, "timeout"),
        ]
        for (name, behaviour, failure) in cases {
            let server = try await FakeTunnelServer.start(behaviour)
            var configuration = RelayLoadBenchmark.Configuration(host: "127.0.0.1", port: server.port, tunnels: 2, rounds: 1)
            configuration.openConcurrency = 2
            configuration.timeout = .seconds(1)
            configuration.generator = generator
            configuration.generatorThreads = 1
            let report = try await RelayLoadBenchmark(configuration).run()
            await server.stop()
            #expect(report.tunnelsOpened == 0, "\(name)")
            #expect(report.failures == [failure: 2], "\(name): \(report.failures)")
            #expect(report.failureExamples.keys.sorted() == [failure], "\(name): \(report.failureExamples)")
        }
    }

    @Test("nothing listens: every open is connectionFailed, and the report shows what the system said", arguments: RelayLoadBenchmark.Generator.allCases)
    func nothingListens(generator: RelayLoadBenchmark.Generator) async throws {
        // Port 1 on loopback: privileged, nothing listens there on these machines.
        var configuration = RelayLoadBenchmark.Configuration(host: "127.0.0.1", port: 1, tunnels: 3, rounds: 1)
        configuration.openConcurrency = 2
        configuration.timeout = .seconds(2)
        configuration.generator = generator
        configuration.generatorThreads = 1
        let report = try await RelayLoadBenchmark(configuration).run()
        #expect(report.tunnelsOpened == 0)
        #expect(report.failures == ["connectionFailed": 3], "\(report.failures)")
        let example = try #require(report.failureExamples["connectionFailed"])
        #expect(example.lowercased().contains("refused"), "\(example)")
        #expect(report.text.contains("first connectionFailed: "), "\(report.text)")
        // No tunnel: no rounds, and the report does not send the user after a relay process.
        #expect(report.messagesRelayed == 0 && report.roundsSeconds == 0 && report.relayAfterRounds == nil)
        #expect(report.text.contains("no tunnel opened; the failures above say why"), "\(report.text)")
        #expect(!report.text.contains("--relay-pid"))
    }

    @Test("ProcessProbe reads this process and finds the relay by its listening port")
    func probe() async throws {
        let sample = try ProcessProbe.current.sample()
        #expect(sample.cpuSeconds > 0)
        #expect(sample.residentBytes > 1_000_000)
        #expect(sample.threads >= 1)
        #expect(sample.openFiles >= 3)
        try await withRelay { _, endpoint in
            #expect(ProcessProbe.listening(onPort: endpoint.port)?.pids == [getpid()])
        }
        #expect(throws: ProcessProbe.ProbeError.self) { try ProcessProbe(pid: Int32.max).sample() }
        // Several processes add up: this process twice is twice this process (within what ran between).
        let twice = try ProcessProbe(pids: [getpid(), getpid()]).sample()
        #expect(twice.threads >= 2 * sample.threads - 4)
        #expect(twice.openFiles >= 2 * sample.openFiles - 8)
        #expect(twice.cpuSeconds >= 2 * sample.cpuSeconds)
    }
}
