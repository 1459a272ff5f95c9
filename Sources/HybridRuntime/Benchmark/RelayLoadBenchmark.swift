import HybridCore
import Foundation
import NIOCore
import NIOPosix

/// A load generator for any tunnel service that speaks the relay endpoints (`/cable/new`,
/// `/cable/connect`): opens N tunnels, holds them, runs R ping-pong rounds on all of them at once,
/// closes them, and measures the relay process from `/proc` while it does (`hybrid-sim bench relay`).
///
/// Each tunnel is a phone-side connection (`/cable/new/{random tunnel ID}`, which yields the routing
/// ID) and a desktop-side connection (`/cable/connect/{routing ID}/{tunnel ID}`). A round is one
/// `payloadSize`-byte binary message from the desktop side, echoed by the phone side: two relayed
/// messages and one round-trip sample. Failures are counted by reason, never hidden.
public struct RelayLoadBenchmark: Sendable {
    /// What to run.
    public struct Configuration: Sendable {
        /// Host of the relay.
        public var host: String
        /// Port of the relay.
        public var port: Int
        /// Tunnels to open and hold (two connections each).
        public var tunnels: Int
        /// Ping-pong rounds per tunnel, run on every tunnel at once.
        public var rounds: Int
        /// Bytes in each ping and pong. Default 64.
        public var payloadSize = 64
        /// Connections being opened at the same time. Default 256.
        public var openConcurrency = 256
        /// Bound on every connect, upgrade, send and receive. Default 30 s.
        public var timeout: Duration = .seconds(30)
        /// How long to hold every tunnel open between the open phase and the rounds. Default none.
        public var hold: Duration = .zero
        /// The relay process to measure; `nil`: no CPU or memory figures.
        public var relay: ProcessProbe?
        /// How the generator drives its connections. Default ``Generator/lean``.
        public var generator = Generator.lean
        /// Event loops of the lean generator. Default one per core.
        public var generatorThreads = System.coreCount

        /// A configuration with the defaults above.
        public init(host: String, port: Int, tunnels: Int, rounds: Int, relay: ProcessProbe? = nil) {
            self.host = host
            self.port = port
            self.tunnels = tunnels
            self.rounds = rounds
            self.relay = relay
        }
    }

    /// How the generator drives its connections.
    public enum Generator: String, Sendable, CaseIterable {
        /// Raw NIO channels on the generator's own event loops, a hand-written WebSocket client in one
        /// handler, pre-encoded masked frames, rounds run inside the handlers, one flush per read
        /// burst: the least generator work per message, so the relay, not the generator, is loaded.
        case lean
        /// ``WebSocketTunnel`` (the runtime's client) and a Swift task per tunnel awaiting each
        /// send and receive: the generator every figure before issue 9's relay work used.
        case tasks
    }

    /// The configuration.
    public let configuration: Configuration

    /// A benchmark with `configuration`.
    public init(_ configuration: Configuration) {
        self.configuration = configuration
    }

    /// Runs the four phases (open, hold, rounds, close) and reports. `progress` gets one line per phase.
    public func run(progress: @Sendable (String) -> Void = { _ in }) async throws -> RelayLoadReport {
        let config = configuration
        var report = RelayLoadReport(configuration: config)
        let relay = config.relay
        let before = try relay?.sample()
        report.relayBefore = before

        progress("opening \(config.tunnels) tunnels (\(config.openConcurrency) connections at a time, \(config.generator.rawValue) generator)…")
        let generator = ProcessProbe.current
        switch config.generator {
        case .tasks:
            try await runPhases(
                open: { failures in await openAll(failures: &failures) { _ in await Self.openPair(config) } },
                rounds: { opened in await pingPong(opened) },
                close: { opened in
                    await closeAll(opened) { pair in
                        await pair.desktop.close()
                        await pair.phone.close()
                    }
                },
                report: &report, generator: generator, progress: progress)
        case .lean:
            let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, config.generatorThreads))
            let loops = Array(group.makeIterator())
            let timeout = TimeAmount(config.timeout)
            do {
                try await runPhases(
                    open: { failures in
                        await openAll(failures: &failures) { await Self.openLeanPair(config, on: loops[$0 % loops.count]) }
                    },
                    rounds: { opened in await Self.leanRounds(opened, config) },
                    close: { opened in
                        await closeAll(opened) { pair in try? await pair.loop.flatSubmit { pair.close(timeout: timeout) }.get() }
                    },
                    report: &report, generator: generator, progress: progress)
            } catch {
                try? await group.shutdownGracefully()
                throw error
            }
            try? await group.shutdownGracefully()
        }
        report.relayAfterClose = try await settledSample(relay, baseline: before)
        return report
    }

    // MARK: - Phases

    /// The four phases (open, hold, rounds, close) with the relay and the generator sampled between
    /// them, for either generator.
    private func runPhases<Opened: Sendable>(
        open: (inout FailureTally) async -> [Opened],
        rounds: ([Opened]) async -> RoundResults,
        close: ([Opened]) async -> Void,
        report: inout RelayLoadReport, generator: ProcessProbe, progress: @Sendable (String) -> Void
    ) async throws {
        let config = configuration
        let relay = config.relay
        let openStart = ContinuousClock.now
        var openFailures = FailureTally()
        let opened = await open(&openFailures)
        report.record(openFailures)
        report.tunnelsOpened = opened.count
        report.openSeconds = (ContinuousClock.now - openStart).benchmarkSeconds
        // A relay gone mid-run (killed) fails the run, after its tunnels are closed; the error says
        // what the run had seen by then (an operator killing one instance wants those counts).
        func sampleRelay() async throws -> ProcessProbe.Sample? {
            do {
                return try relay?.sample()
            } catch {
                progress("closing \(opened.count) tunnels…")
                await close(opened)
                let failures = report.failures.isEmpty
                    ? "no failure" : "failures: " + report.failures.sorted { $0.key < $1.key }.map { "\($0.key) ×\($0.value)" }.joined(separator: ", ")
                throw ProcessProbe.ProbeError(
                    description: "\(error); by then \(report.tunnelsOpened) of \(config.tunnels) tunnel(s) had opened, \(failures)")
            }
        }
        report.relayAfterOpen = try await sampleRelay()
        guard !opened.isEmpty else {
            // Nothing to measure: no hold, no rounds, no close (the failures say why, e.g. connection refused).
            progress("no tunnel opened; no rounds")
            return
        }

        if config.hold > .zero {
            progress("holding \(opened.count) tunnels for \(config.hold)…")
            try? await Task.sleep(for: config.hold)
        }
        progress("\(opened.count) tunnels open; \(config.rounds) ping-pong rounds on all of them at once…")
        let generatorBefore = try? generator.sample()
        let roundsStart = ContinuousClock.now
        let results = await rounds(opened)
        let samples = results.samples
        report.roundsSeconds = (ContinuousClock.now - roundsStart).benchmarkSeconds
        report.record(results.failures)
        report.relayAfterRounds = try await sampleRelay()
        if let generatorBefore, let generatorAfter = try? generator.sample(), report.roundsSeconds > 0 {
            report.generatorCoresUsedDuringRounds = (generatorAfter.cpuSeconds - generatorBefore.cpuSeconds) / report.roundsSeconds
        }
        report.roundTrips = LatencySummary(milliseconds: samples)
        report.messagesRelayed = samples.count * 2

        progress("closing \(opened.count) tunnels…")
        let closeStart = ContinuousClock.now
        await close(opened)
        report.closeSeconds = (ContinuousClock.now - closeStart).benchmarkSeconds
    }

    /// Both connections of one open tunnel.
    struct Pair: Sendable {
        let phone: WebSocketTunnel
        let desktop: WebSocketTunnel
    }

    /// Opens the tunnels, `openConcurrency / 2` at a time (two connections each); `open(i)` opens
    /// tunnel number `i`. Failures go to `failures` (``FailureTally``: counted by name, the first
    /// of each kind in its own words: a refused connection, no free port, …).
    private func openAll<Opened: Sendable>(
        failures: inout FailureTally,
        _ open: @escaping @Sendable (Int) async -> Result<Opened, RuntimeError>
    ) async -> [Opened] {
        let config = configuration
        return await withTaskGroup(of: Result<Opened, RuntimeError>.self) { group in
            var pairs: [Opened] = []
            pairs.reserveCapacity(config.tunnels)
            var started = 0
            func startNext() {
                guard started < config.tunnels else { return }
                let index = started
                started += 1
                group.addTask { await open(index) }
            }
            for _ in 0..<max(1, config.openConcurrency / 2) { startNext() }
            for await result in group {
                switch result {
                case .success(let pair): pairs.append(pair)
                case .failure(let error): failures.add(TunnelFailure(error))
                }
                startNext()
            }
            return pairs
        }
    }

    private static func openPair(_ config: Configuration) async -> Result<Pair, RuntimeError> {
        let tunnelID = RandomSource.system.bytes(HybridConstants.tunnelIDSize)
        let phone: WebSocketTunnel
        do {
            phone = try await WebSocketTunnel.open(
                host: config.host, port: config.port, path: TunnelServicePath.new(tunnelID: tunnelID).path,
                timeout: config.timeout)
        } catch {
            return .failure(Self.runtimeError(error))
        }
        guard let routing = phone.routingID, routing.count == HybridConstants.routingIDSize else {
            await phone.close()
            return .failure(RuntimeError(.handshakeFailed, "no X-caBLE-Routing-ID on /cable/new"))
        }
        do {
            let desktop = try await WebSocketTunnel.open(
                host: config.host, port: config.port,
                path: TunnelServicePath.connect(routingID: routing, tunnelID: tunnelID).path, timeout: config.timeout)
            return .success(Pair(phone: phone, desktop: desktop))
        } catch {
            await phone.close()
            return .failure(Self.runtimeError(error))
        }
    }

    /// What the rounds of all tunnels gave: the round trips (ms) and the failures.
    struct RoundResults: Sendable {
        var samples: [Double] = []
        var failures = FailureTally()

        /// Adds one tunnel's rounds.
        mutating func add(_ samples: [Double], _ failure: TunnelFailure?) {
            self.samples += samples
            if let failure { failures.add(failure) }
        }
    }

    /// Failures by name, with the first one's words for each (opening or in the rounds).
    struct FailureTally: Sendable {
        var counts: [String: Int] = [:]
        var examples: [String: String] = [:]

        mutating func add(_ failure: TunnelFailure) {
            counts[failure.name, default: 0] += 1
            if examples[failure.name] == nil { examples[failure.name] = failure.example }
        }
    }

    /// Why one tunnel failed to open or stopped in its rounds: a ``failureName(_:)`` and its words.
    struct TunnelFailure: Sendable {
        var name: String
        var example: String

        init(_ name: String, _ example: String) {
            (self.name, self.example) = (name, example)
        }

        init(_ error: RuntimeError) {
            self.init(RelayLoadBenchmark.failureName(error), error.reason)
        }
    }

    private func pingPong(_ pairs: [Pair]) async -> RoundResults {
        let config = configuration
        return await withTaskGroup(of: (samples: [Double], failure: TunnelFailure?).self) { group in
            for pair in pairs {
                group.addTask { await Self.rounds(on: pair, config) }
            }
            var results = RoundResults()
            results.samples.reserveCapacity(pairs.count * config.rounds)
            for await result in group { results.add(result.samples, result.failure) }
            return results
        }
    }

    private static func rounds(on pair: Pair, _ config: Configuration) async -> (samples: [Double], failure: TunnelFailure?) {
        let payload = [UInt8](repeating: 0xA5, count: config.payloadSize)
        var samples: [Double] = []
        samples.reserveCapacity(config.rounds)
        do {
            for _ in 0..<config.rounds {
                let start = ContinuousClock.now
                try await pair.desktop.send(payload)
                let ping = try await pair.phone.receive(timeout: config.timeout)
                try await pair.phone.send(ping)
                let pong = try await pair.desktop.receive(timeout: config.timeout)
                guard pong == payload else {
                    return (samples, TunnelFailure("payload changed in transit", "the pong differed from the ping"))
                }
                samples.append((ContinuousClock.now - start).benchmarkMilliseconds)
            }
            return (samples, nil)
        } catch {
            return (samples, TunnelFailure(runtimeError(error)))
        }
    }

    /// Closes the tunnels, `openConcurrency / 2` at a time; `close` closes one.
    private func closeAll<Opened: Sendable>(_ pairs: [Opened], _ close: @escaping @Sendable (Opened) async -> Void) async {
        let concurrency = max(1, configuration.openConcurrency / 2)
        await withTaskGroup(of: Void.self) { group in
            var next = 0
            func startNext() {
                guard next < pairs.count else { return }
                let pair = pairs[next]
                next += 1
                group.addTask { await close(pair) }
            }
            for _ in 0..<concurrency { startNext() }
            for await _ in group { startNext() }
        }
    }

    /// The relay after the close phase: waits (up to 5 s) for its descriptors to return to the
    /// baseline, so the figure is not taken while the last sockets are still closing.
    private func settledSample(_ relay: ProcessProbe?, baseline: ProcessProbe.Sample?) async throws -> ProcessProbe.Sample? {
        guard let relay else { return nil }
        var sample = try relay.sample()
        let deadline = ContinuousClock.now + .seconds(5)
        while let baseline, sample.openFiles > baseline.openFiles, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
            sample = try relay.sample()
        }
        return sample
    }

    // MARK: - Failures

    static func runtimeError(_ error: any Error) -> RuntimeError {
        (error as? RuntimeError) ?? RuntimeError(.connectionFailed, "\(error)")
    }

    /// A short, stable name for a failure: the HTTP status of a refused upgrade, the close code of a
    /// closed tunnel, otherwise the error code.
    static func failureName(_ error: RuntimeError) -> String {
        if let status = error.httpStatus { return "HTTP \(status)" }
        if let close = error.closeCode { return "closed \(close.rawValue)" }
        return error.code.rawValue
    }
}

extension Duration {
    /// The duration in seconds, as a floating-point number.
    var benchmarkSeconds: Double { benchmarkMilliseconds / 1e3 }
}
