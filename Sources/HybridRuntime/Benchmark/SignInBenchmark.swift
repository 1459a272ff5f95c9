import CTAP2
import HybridCore
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// Times complete QR sign-ins through a loopback relay with real sockets, one after another:
/// ``HybridHarness`` starts a relay on an ephemeral port, a ``SimulatedPhone`` registers one passkey,
/// then every sign-in runs the whole flow (QR session, UDP advert, two WebSocket tunnels, Noise
/// handshake, getAssertion, shutdown) and is verified as the relying party.
///
/// A sign-in's wall time runs from just before ``HybridHarness/signIn(on:relyingParty:knownCredentials:allowCredentials:options:)``
/// until the relying party verified the assertion (``HybridHarness/TransactionOptions/verified``),
/// which it does as soon as the desktop has the response, as a browser resolves the WebAuthn request
/// then. The tunnel's closing handshakes run after that; the *transaction* time runs until the call
/// returned, i.e. until both sides finished and closed, and the next sign-in starts only then.
public struct SignInBenchmark: Sendable {
    /// Where the time of a sign-in goes, from the drivers' progress events.
    public struct Phase: Sendable, Hashable, Codable {
        /// What happens in it.
        public var name: String
        /// Its wall times over all sign-ins, in milliseconds.
        public var summary: LatencySummary
    }

    /// What a run measured.
    public struct Result: Sendable, Hashable, Codable {
        /// Timed sign-ins.
        public var count: Int
        /// Untimed sign-ins before them.
        public var warmup: Int
        /// Wall time of each timed sign-in (start to verified assertion), in milliseconds, in the
        /// order they ran.
        public var samples: [Double]
        /// Statistics of `samples`.
        public var summary: LatencySummary
        /// The sign-in split at the drivers' events; the medians add up to about the median sign-in.
        public var phases: [Phase]
        /// Each sign-in's whole transaction: from the start until both sides closed the tunnel (the
        /// sign-in plus its teardown), in milliseconds.
        public var transaction: LatencySummary
        /// What runs after the assertion was verified: the closing handshakes of both tunnel
        /// connections and the phone's end of the transaction.
        public var teardown: LatencySummary
        /// Wall time of the one registration, in milliseconds.
        public var registrationMilliseconds: Double
        /// Untimed sign-ins run after interleaved work (`between` returned `true`), before the
        /// next timed one.
        public var rewarmSignIns: Int
    }

    /// The milestones that split a sign-in, in the order they happen. The last phase runs from the
    /// last milestone to the end of the sign-in.
    static let milestones: [(name: String, ends: @Sendable (SessionEvent) -> Bool)] = [
        ("scanner up, phone opens its tunnel", { if case .tunnelCreated = $0 { return true } else { return false } }),
        ("advert sent and matched", { if case .advertAccepted = $0 { return true } else { return false } }),
        ("desktop joins the tunnel", { if case .tunnelJoined = $0 { return true } else { return false } }),
        ("Noise handshake, post-handshake message", { if case .authenticatorReady = $0 { return true } else { return false } }),
        ("request, assertion, response", { if case .responseReceived = $0 { return true } else { return false } }),
    ]
    static let lastPhase = "shutdown sent, RP verification"

    /// Timed sign-ins.
    public var count: Int
    /// Untimed sign-ins first (connection set-up paths, lazily created event-loop resources).
    public var warmup: Int
    /// Limits on every wait of every sign-in.
    public var timeouts: SessionTimeouts
    /// The relying party signed in to.
    public var relyingParty: RelyingParty
    /// Logger for the relay and both sides (by default nothing is logged: logging is not what is timed).
    public var logger: Logger
    /// Which event loops the harness's relay and the sign-ins' sockets run on.
    public var loops: Loops

    /// Which event loops of SwiftNIO's singleton group a benchmark uses
    /// (``HybridHarness/start(configuration:group:logger:)``).
    public enum Loops: String, Sendable, Hashable, Codable, CaseIterable {
        /// One loop: the relay's one shard, both tunnels' connections and the UDP sockets. With
        /// SwiftNIO's loops as the concurrency executor the drivers' tasks run there too (a task
        /// resumes on the loop that woke it), and the one-shard relay accepts its connections on
        /// that loop too, so a sign-in runs on one thread.
        case one
        /// Every loop (one per core): a relay shard per loop, each connection on the next loop.
        case all

        var group: any EventLoopGroup {
            switch self {
            case .one: MultiThreadedEventLoopGroup.singleton.next()
            case .all: MultiThreadedEventLoopGroup.singleton
            }
        }
    }

    /// A benchmark of `count` sign-ins after `warmup` untimed ones.
    public init(
        count: Int = 100, warmup: Int = 5, timeouts: SessionTimeouts = .fast,
        relyingParty: RelyingParty = RelyingParty(id: "bench.example", origin: "https://bench.example"),
        logger: Logger = Logger(label: "hybrid-sim.bench", factory: { _ in SwiftLogNoOpLogHandler() }),
        loops: Loops = .one
    ) {
        precondition(count > 0 && warmup >= 0, "count must be positive and warmup non-negative")
        self.count = count
        self.warmup = warmup
        self.timeouts = timeouts
        self.relyingParty = relyingParty
        self.logger = logger
        self.loops = loops
    }

    /// Starts a harness, registers, runs the sign-ins and shuts the harness down.
    ///
    /// - Parameters:
    ///   - progress: called after each timed sign-in with the number done so far.
    ///   - between: called after each timed sign-in (outside its timing) with the number done so
    ///     far, e.g. to interleave other measurements with the sign-ins; it returns whether it did
    ///     such work, and then one untimed sign-in runs before the next timed one, so that the
    ///     caches the other work evicted are not refilled on a timed sign-in's clock.
    /// - Throws: the first sign-in's error (a ``TransactionError`` or a `Ceremony.Failure`), or
    ///   what `between` throws.
    public func run(
        progress: @Sendable (Int) -> Void = { _ in }, between: (Int) throws -> Bool = { _ in false }
    ) async throws -> Result {
        let harness = try await HybridHarness.start(group: loops.group, logger: logger)
        do {
            // With one loop, the whole run prefers it (the harness's drivers do anyway).
            let result = try await withTaskExecutorPreference(harness.taskExecutor) {
                try await run(on: harness, progress: progress, between: between)
            }
            await harness.shutdown()
            return result
        } catch {
            await harness.shutdown()
            throw error
        }
    }

    private func run(
        on harness: HybridHarness, progress: @Sendable (Int) -> Void, between: (Int) throws -> Bool
    ) async throws -> Result {
        let phone = SimulatedPhone()
        let clock = ContinuousClock()
        var options = HybridHarness.TransactionOptions()
        options.timeouts = timeouts

        let registrationStart = clock.now
        var credential = try await harness.register(
            on: phone, relyingParty: relyingParty, userName: "bench", options: options)
        let registration = clock.now - registrationStart

        for _ in 0..<warmup {
            credential = try await harness.signIn(
                on: phone, relyingParty: relyingParty, knownCredentials: [credential], options: options)
        }

        var samples: [Duration] = []
        var transactions: [Duration] = []
        var teardowns: [Duration] = []
        var phaseSamples = [[Duration]](repeating: [], count: Self.milestones.count + 1)
        var rewarms = 0
        samples.reserveCapacity(count)
        for done in 1...count {
            let log = EventLog()
            options.events = { event in log.record(event) }
            options.verified = { log.verified() }
            let start = clock.now
            credential = try await harness.signIn(
                on: phone, relyingParty: relyingParty, knownCredentials: [credential], options: options)
            let end = clock.now
            let verified = min(log.verifiedAt ?? end, end)
            samples.append(verified - start)
            transactions.append(end - start)
            teardowns.append(end - verified)
            let phases = Self.split(start: start, end: verified, marks: log.marks)
            for (index, phase) in phases.enumerated() { phaseSamples[index].append(phase) }
            progress(done)
            if try between(done), done < count {
                options.events = { _ in }
                options.verified = nil
                credential = try await harness.signIn(
                    on: phone, relyingParty: relyingParty, knownCredentials: [credential], options: options)
                rewarms += 1
            }
        }

        let names = Self.milestones.map(\.name) + [Self.lastPhase]
        return Result(
            count: count, warmup: warmup, samples: samples.map(\.benchmarkMilliseconds),
            summary: LatencySummary(samples: samples),
            phases: zip(names, phaseSamples).map { Phase(name: $0, summary: LatencySummary(samples: $1)) },
            transaction: LatencySummary(samples: transactions), teardown: LatencySummary(samples: teardowns),
            registrationMilliseconds: registration.benchmarkMilliseconds, rewarmSignIns: rewarms)
    }

    /// Durations between consecutive milestones (a missing one counts as zero length).
    static func split(
        start: ContinuousClock.Instant, end: ContinuousClock.Instant, marks: [(SessionEvent, ContinuousClock.Instant)]
    ) -> [Duration] {
        var previous = start
        var phases: [Duration] = []
        for milestone in milestones {
            let at = marks.first { milestone.ends($0.0) }?.1 ?? previous
            phases.append(max(at - previous, .zero))
            previous = max(at, previous)
        }
        phases.append(max(end - previous, .zero))
        return phases
    }
}

/// When each progress event of one sign-in arrived (both sides report into it concurrently), and
/// when the relying party verified the assertion.
private final class EventLog: Sendable {
    private let state = Mutex<[(SessionEvent, ContinuousClock.Instant)]>([])
    private let verifiedState = Mutex<ContinuousClock.Instant?>(nil)

    func record(_ event: SessionEvent) {
        let now = ContinuousClock.now
        state.withLock { $0.append((event, now)) }
    }

    func verified() {
        let now = ContinuousClock.now
        verifiedState.withLock { $0 = now }
    }

    var marks: [(SessionEvent, ContinuousClock.Instant)] { state.withLock { $0 } }
    var verifiedAt: ContinuousClock.Instant? { verifiedState.withLock { $0 } }
}
