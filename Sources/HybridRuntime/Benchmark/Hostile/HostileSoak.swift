import CTAP2
import Foundation
import HybridCore
import Logging
import Synchronization

/// The hostile-client soak (`hybrid-sim bench hostile`): for a fixed time, a population of
/// misbehaving clients (``HostileAttack``) attacks one relay over loopback while honest QR sign-ins
/// (``HybridHarness``: QR session, UDP advert, both tunnels, Noise handshake, getAssertion, RP
/// verification) run through the same relay without pause. It reports the honest sign-ins (count,
/// failures, latency), what each attack got back, and the relay process's RSS and descriptors
/// over time (``ProcessProbe``), then checks that every honest sign-in succeeded, the relay's RSS
/// stayed under a bound and its descriptors returned to the baseline once the attackers stopped.
///
/// Attackers connect from 127.0.0.2…127.0.0.254 (unjoined tunnels from 127.0.0.2…33, source
/// floods from 127.0.0.251…254, the others from 127.0.0.34…250), honest clients from 127.0.0.1, so the relay's per-source caps can
/// tell them apart. Everything is bounded: each attacker task holds at most one attempt at a time
/// (two connections for a never-reading tunnel, a burst for a source flood), every wait has a
/// deadline, and every attacker lets go at the end of the run.
package struct HostileSoak: Sendable {
    /// What to run.
    package struct Configuration: Sendable {
        /// Host of the relay (loopback).
        package var host: String
        /// Port of the relay.
        package var port: Int
        /// How long the attack and the honest sign-ins run.
        package var duration: Duration
        /// Attacker tasks of the weighted attacks, each holding about one connection at a time.
        package var hostile: Int
        /// Source-flood tasks (one source address each, 127.0.0.251…); 0: none. Default 4.
        package var sourceFloodWorkers = 4
        /// Connections each source-flood burst opens at once. Default 48.
        package var sourceFloodBurst = 48
        /// Honest sign-ins running at once. Default 2.
        package var honestConcurrency = 2
        /// Limit on every wait of an honest sign-in. Default 20 s.
        package var honestTimeout: Duration = .seconds(20)
        /// How long an attack that holds its connection holds it, in seconds (uniformly drawn). Default 10…30.
        package var holdSeconds: ClosedRange<Double> = 10...30
        /// Bound on each wait for the relay's answer to an attacker. Default 10 s.
        package var answerTimeout: Duration = .seconds(10)
        /// Attacker tasks start spread over this time. Default 5 s.
        package var rampUp: Duration = .seconds(5)
        /// After the run, how long to wait for the relay's descriptors to return to the baseline. Default 30 s.
        package var settle: Duration = .seconds(30)
        /// The relay's RSS must stay below this. Default 512 MiB.
        package var maxRSSBytes = 512 * 1024 * 1024
        /// After the run the relay's RSS must be back within this of its baseline. Default 16 MiB.
        package var maxRSSGrowthBytes = 16 * 1024 * 1024
        /// How often the relay is sampled. Default 1 s.
        package var sampleInterval: Duration = .seconds(1)
        /// The relay process to measure; `nil`: no RSS or descriptor figures (and no checks on them).
        package var relay: ProcessProbe?
        /// The relay's limits, as flags and values, for the report.
        package var relayLimits: [String: String] = [:]

        /// A configuration with the defaults above.
        package init(host: String, port: Int, duration: Duration, hostile: Int, relay: ProcessProbe? = nil) {
            self.host = host
            self.port = port
            self.duration = duration
            self.hostile = hostile
            self.relay = relay
        }
    }

    /// The configuration.
    package let configuration: Configuration

    /// A soak with `configuration`.
    package init(_ configuration: Configuration) {
        self.configuration = configuration
    }

    /// The attack of each attacker task: the weighted attacks in proportion, then the source floods.
    var workers: [HostileAttack] {
        let weighted = HostileAttack.allCases.filter { $0.weight > 0 }
        let total = weighted.reduce(0) { $0 + $1.weight }
        var list: [HostileAttack] = []
        for attack in weighted { list += Array(repeating: attack, count: configuration.hostile * attack.weight / total) }
        while list.count < configuration.hostile { list.append(weighted[list.count % weighted.count]) }
        return list + Array(repeating: .sourceFlood, count: configuration.sourceFloodWorkers)
    }

    /// The source address of attacker task `index` running `attack`.
    static func source(index: Int, attack: HostileAttack, floodIndex: Int) -> String {
        switch attack {
        case .sourceFlood: return "127.0.0.\(251 + floodIndex % 4)"
        case .unjoinedTunnel: return "127.0.0.\(2 + index % 32)"
        default: return "127.0.0.\(34 + index % 217)"
        }
    }

    /// Runs the soak. `progress` gets a line now and then.
    package func run(progress: @escaping @Sendable (String) -> Void = { _ in }) async throws -> HostileSoakReport {
        let config = configuration
        let tally = HostileTally()
        let honest = HonestTally()
        var report = HostileSoakReport(configuration: config)
        let sampler = RelaySampler(probe: config.relay, tally: tally)

        progress("warm-up sign-in through \(config.host):\(config.port)…")
        await Self.honestLoop(config, honest: honest, until: .now, warmUp: true)
        report.relayBaseline = try config.relay?.sample()

        let start = ContinuousClock.now
        let stopAt = start + config.duration
        let workers = self.workers
        progress("\(workers.count) attacker tasks, \(config.honestConcurrency) honest sign-in loops, for \(config.duration)…")
        let samplerTask = Task { await sampler.run(every: config.sampleInterval, start: start) }
        let reporter = Task {
            while !Task.isCancelled, ContinuousClock.now < stopAt {
                guard (try? await Task.sleep(for: .seconds(30))) != nil, ContinuousClock.now < stopAt else { return }
                let done = honest.snapshot
                progress("t+\(Int((ContinuousClock.now - start).benchmarkSeconds)) s: \(tally.openNow) hostile connections open, \(done.samples.count) honest sign-ins, \(done.failures.values.reduce(0, +)) failed")
            }
        }
        await withTaskGroup(of: Void.self) { group in
            var floodIndex = 0
            for (index, attack) in workers.enumerated() {
                let delay = config.rampUp * (Double(index) / Double(max(1, workers.count)))
                let source = Self.source(index: index, attack: attack, floodIndex: floodIndex)
                if attack == .sourceFlood { floodIndex += 1 }
                group.addTask {
                    try? await Task.sleep(for: delay)
                    await Self.attackLoop(attack, source: source, config, tally: tally, until: stopAt)
                }
            }
            for _ in 0..<config.honestConcurrency {
                group.addTask { await Self.honestLoop(config, honest: honest, until: stopAt, warmUp: false) }
            }
        }
        reporter.cancel()
        report.attackSeconds = (ContinuousClock.now - start).benchmarkSeconds
        progress("attackers stopped; waiting up to \(config.settle) for the relay's descriptors to return to the baseline…")
        report.relayEnd = try await settledSample(baseline: report.relayBaseline, start: start, sampler: sampler)
        samplerTask.cancel()
        _ = await samplerTask.value

        report.series = sampler.points
        report.fill(honest: honest.snapshot, tally: tally.snapshot, steadyFrom: config.rampUp + .seconds(10), until: config.duration)
        report.check()
        return report
    }

    // MARK: - Loops

    private static func attackLoop(
        _ attack: HostileAttack, source: String, _ config: Configuration, tally: HostileTally, until stopAt: ContinuousClock.Instant
    ) async {
        while ContinuousClock.now < stopAt {
            let hold = Duration.milliseconds(Int(Double.random(in: config.holdSeconds) * 1000))
            let attempt = HostileAttempt(
                host: config.host, port: config.port, source: source, holdUntil: min(.now + hold, stopAt),
                answerTimeout: config.answerTimeout, burst: config.sourceFloodBurst, tally: tally, attack: attack)
            await attempt.run()
            // Holders come back soon; the quick attacks (and unjoined tunnels, mostly refused with 429
            // once their addresses hold 4) pace themselves, so the churn stays bounded on a small machine.
            let pause: Int
            switch attack {
            case .connectStorm: pause = Int.random(in: 300...800)
            case .unjoinedTunnel: pause = Int.random(in: 1000...3000)
            default: pause = attack.holds ? Int.random(in: 200...500) : Int.random(in: 1000...3000)
            }
            try? await Task.sleep(for: .milliseconds(pause))
        }
    }

    /// Honest QR sign-ins one after another until `stopAt` (one registration first); with `warmUp`,
    /// one registration and one sign-in, not counted.
    private static func honestLoop(
        _ config: Configuration, honest: HonestTally, until stopAt: ContinuousClock.Instant, warmUp: Bool
    ) async {
        let harness = HybridHarness.using(
            relayURL: RelayEndpoint(host: config.host, port: config.port).url,
            logger: Logger(label: "hybrid-sim.bench.hostile", factory: { _ in SwiftLogNoOpLogHandler() }))
        let phone = SimulatedPhone()
        let relyingParty = RelyingParty(id: "soak.example", origin: "https://soak.example")
        var options = HybridHarness.TransactionOptions()
        let wait = config.honestTimeout
        options.timeouts = SessionTimeouts(advert: wait, connect: wait, handshake: wait, message: wait, userAction: wait)
        var credential: RegisteredCredential?
        var attempts = 0
        while warmUp ? attempts < 2 : ContinuousClock.now < stopAt {
            attempts += 1
            let begin = ContinuousClock.now
            do {
                if let known = credential {
                    credential = try await harness.signIn(
                        on: phone, relyingParty: relyingParty, knownCredentials: [known], options: options)
                    if !warmUp { honest.succeeded(ContinuousClock.now - begin) }
                } else {
                    credential = try await harness.register(
                        on: phone, relyingParty: relyingParty, userName: "soak", options: options)
                    if !warmUp { honest.registered() }
                }
            } catch {
                honest.failed("\(error)")
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    /// The relay once its descriptors are back at the baseline, or after ``Configuration/settle``.
    private func settledSample(
        baseline: ProcessProbe.Sample?, start: ContinuousClock.Instant, sampler: RelaySampler
    ) async throws -> ProcessProbe.Sample? {
        guard let probe = configuration.relay else { return nil }
        let deadline = ContinuousClock.now + configuration.settle
        var sample = try probe.sample()
        while let baseline, sample.openFiles > baseline.openFiles, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
            sample = try probe.sample()
        }
        // An idle relay returns its freed memory one second after its last connection closed.
        let memoryDeadline = min(ContinuousClock.now + .seconds(3), deadline)
        while let baseline, sample.residentBytes > baseline.residentBytes + configuration.maxRSSGrowthBytes,
            ContinuousClock.now < memoryDeadline
        {
            try await Task.sleep(for: .milliseconds(200))
            sample = try probe.sample()
        }
        return sample
    }
}

/// Honest sign-ins: latencies and failures by reason.
final class HonestTally: Sendable {
    private let state = Mutex<(samples: [Double], failures: [String: Int], registrations: Int)>(([], [:], 0))

    func succeeded(_ duration: Duration) { state.withLock { $0.samples.append(duration.benchmarkMilliseconds) } }
    func registered() { state.withLock { $0.registrations += 1 } }
    func failed(_ reason: String) { state.withLock { $0.failures[String(reason.prefix(160)), default: 0] += 1 } }

    var snapshot: (samples: [Double], failures: [String: Int], registrations: Int) { state.withLock { $0 } }
}

/// Samples the relay (RSS, descriptors) and the attacker connections open, until cancelled.
final class RelaySampler: Sendable {
    private let probe: ProcessProbe?
    private let tally: HostileTally
    private let state = Mutex<[HostileSoakReport.Point]>([])

    init(probe: ProcessProbe?, tally: HostileTally) {
        self.probe = probe
        self.tally = tally
    }

    var points: [HostileSoakReport.Point] { state.withLock { $0 } }

    func run(every interval: Duration, start: ContinuousClock.Instant) async {
        while !Task.isCancelled {
            let sample = try? probe?.sample()
            let point = HostileSoakReport.Point(
                seconds: (ContinuousClock.now - start).benchmarkSeconds, hostileOpen: tally.openNow,
                residentBytes: sample?.residentBytes, openFiles: sample?.openFiles)
            state.withLock { $0.append(point) }
            try? await Task.sleep(for: interval)
        }
    }
}
