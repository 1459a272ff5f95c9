import Foundation

/// What one ``RelayLoadBenchmark`` run measured. Relay figures (`relay…`) are present only when the
/// relay process could be read from `/proc`.
public struct RelayLoadReport: Sendable, Hashable, Encodable {
    /// Where it ran.
    public var machine: MachineInfo = .current
    /// `host:port` of the relay.
    public var relayAddress: String
    /// Tunnels asked for.
    public var tunnelsRequested: Int
    /// Ping-pong rounds per tunnel asked for.
    public var rounds: Int
    /// Bytes per ping and pong.
    public var payloadSize: Int
    /// The generator that drove the load (``RelayLoadBenchmark/Generator``: `lean` or `tasks`).
    public var generator: String
    /// Event loops of the lean generator (the `tasks` generator uses the runtime's shared group).
    public var generatorThreads: Int
    /// The generator process's CPU seconds per wall second during the rounds (it shares the machine
    /// with a local relay: together they cannot exceed the machine's cores).
    public var generatorCoresUsedDuringRounds: Double?
    /// Tunnels whose two connections both upgraded.
    public var tunnelsOpened = 0
    /// Failed opens and failed rounds by reason (`HTTP 503`, `closed 1008`, `timeout`, …).
    public var failures: [String: Int] = [:]
    /// The first error message of each failure reason of the open phase (e.g. `connectionFailed`:
    /// "connect to 127.0.0.1:47080: … Cannot assign requested address (errno: 99)").
    public var failureExamples: [String: String] = [:]
    /// Wall time of the open phase, seconds.
    public var openSeconds = 0.0
    /// Wall time of the rounds phase, seconds.
    public var roundsSeconds = 0.0
    /// Wall time of the close phase, seconds.
    public var closeSeconds = 0.0
    /// Messages the relay forwarded during the rounds (two per completed round).
    public var messagesRelayed = 0
    /// Round-trip times of the completed rounds (desktop → relay → phone → relay → desktop), ms.
    public var roundTrips = LatencySummary(milliseconds: [])
    /// How many relay processes the figures add up (0: not measured).
    public var relayProcesses = 0
    /// The relay before the open phase.
    public var relayBefore: ProcessProbe.Sample?
    /// The relay with every tunnel open.
    public var relayAfterOpen: ProcessProbe.Sample?
    /// The relay after the rounds.
    public var relayAfterRounds: ProcessProbe.Sample?
    /// The relay after the close phase (once its descriptors are back to the baseline, or after 5 s).
    public var relayAfterClose: ProcessProbe.Sample?
    /// When the run started (ISO 8601, UTC).
    public var startedAt: String = Date().formatted(.iso8601)
    /// How the figures are given, so the JSON explains itself.
    public static let units =
        "a key names its unit (Seconds, Microseconds, KiB, PerSecond); roundTrips are in milliseconds; "
        + "relay samples: cpuSeconds and systemCPUSeconds in seconds, residentBytes in bytes"

    init(configuration: RelayLoadBenchmark.Configuration) {
        relayAddress = WebSocketURL.authority(host: configuration.host, port: configuration.port)
        tunnelsRequested = configuration.tunnels
        rounds = configuration.rounds
        payloadSize = configuration.payloadSize
        generator = configuration.generator.rawValue
        generatorThreads = configuration.generator == .lean ? configuration.generatorThreads : 0
        relayProcesses = configuration.relay?.pids.count ?? 0
    }

    // MARK: - Derived figures

    /// Total failures of any kind.
    public var failureCount: Int { failures.values.reduce(0, +) }
    /// Tunnels opened per second of the open phase.
    public var tunnelsPerSecond: Double { openSeconds > 0 ? Double(tunnelsOpened) / openSeconds : 0 }
    /// Messages relayed per second of the rounds phase.
    public var messagesPerSecond: Double { roundsSeconds > 0 ? Double(messagesRelayed) / roundsSeconds : 0 }

    /// Relay CPU time per opened tunnel (two upgrades and a join), µs.
    public var relayMicrosecondsPerOpen: Double? {
        guard let a = relayBefore, let b = relayAfterOpen, tunnelsOpened > 0 else { return nil }
        return (b.cpuSeconds - a.cpuSeconds) * 1e6 / Double(tunnelsOpened)
    }

    /// Relay CPU time per relayed message during the rounds, µs.
    public var relayMicrosecondsPerMessage: Double? {
        guard let a = relayAfterOpen, let b = relayAfterRounds, messagesRelayed > 0 else { return nil }
        return (b.cpuSeconds - a.cpuSeconds) * 1e6 / Double(messagesRelayed)
    }

    /// The kernel's part of ``relayMicrosecondsPerMessage`` (system CPU time per relayed message),
    /// µs: what the relay's reads and writes cost in the kernel, which no change to the relay's own
    /// code removes; the rest is user space.
    public var relayKernelMicrosecondsPerMessage: Double? {
        guard let a = relayAfterOpen, let b = relayAfterRounds, messagesRelayed > 0 else { return nil }
        return (b.systemCPUSeconds - a.systemCPUSeconds) * 1e6 / Double(messagesRelayed)
    }

    /// Relay CPU time per closed tunnel (both closing handshakes and the connections' teardown), µs:
    /// from the end of the rounds until the relay's descriptors were back to the baseline (or 5 s),
    /// so it includes an idle relay's memory trim after its last connection closed.
    public var relayMicrosecondsPerClose: Double? {
        guard let a = relayAfterRounds, let b = relayAfterClose, tunnelsOpened > 0 else { return nil }
        return (b.cpuSeconds - a.cpuSeconds) * 1e6 / Double(tunnelsOpened)
    }

    /// Relay CPU seconds per wall second during the rounds: above 1 means more than one core was busy.
    public var relayCoresUsedDuringRounds: Double? {
        guard let a = relayAfterOpen, let b = relayAfterRounds, roundsSeconds > 0 else { return nil }
        return (b.cpuSeconds - a.cpuSeconds) / roundsSeconds
    }

    /// Growth of the relay's resident memory per open tunnel, KiB.
    public var relayKiBPerTunnel: Double? {
        guard let a = relayBefore, let b = relayAfterOpen, tunnelsOpened > 0 else { return nil }
        return Double(b.residentBytes - a.residentBytes) / 1024 / Double(tunnelsOpened)
    }

    /// Adds `tally`'s failures (their counts, and each kind's first words unless one is known).
    mutating func record(_ tally: RelayLoadBenchmark.FailureTally) {
        failures.merge(tally.counts, uniquingKeysWith: +)
        failureExamples.merge(tally.examples) { first, _ in first }
    }

    /// A warning when the relay's CPU figures rest on few of `/proc`'s clock ticks (10 ms each):
    /// a run of 50 tunnels uses a handful, so "1000.0 µs per tunnel" is one tick more or less.
    var resolutionNote: String? {
        guard let before = relayBefore, let open = relayAfterOpen, let rounds = relayAfterRounds else { return nil }
        let tick = ProcessProbe.cpuTickSeconds
        let openTicks = Int(((open.cpuSeconds - before.cpuSeconds) / tick).rounded())
        let roundTicks = Int(((rounds.cpuSeconds - open.cpuSeconds) / tick).rounded())
        guard min(openTicks, roundTicks) < 100 else { return nil }
        return "  note: /proc counts CPU time in \(Int((tick * 1000).rounded())) ms ticks and this run used \(openTicks) ticks opening "
            + "and \(roundTicks) in the rounds: figures from fewer than 100 ticks are coarse (RSS too grows in whole pages); "
            + "use more --tunnels and --rounds"
    }

    /// JSON keys: the stored fields plus the derived figures, so the JSON carries both.
    private enum CodingKeys: String, CodingKey {
        case machine, relayAddress, tunnelsRequested, rounds, payloadSize, generator, generatorThreads
        case generatorCoresUsedDuringRounds, tunnelsOpened, failures, failureExamples
        case openSeconds, roundsSeconds, closeSeconds, messagesRelayed, roundTrips
        case relayProcesses, relayBefore, relayAfterOpen, relayAfterRounds, relayAfterClose
        case tunnelsPerSecond, messagesPerSecond, relayMicrosecondsPerOpen, relayMicrosecondsPerMessage
        case relayCoresUsedDuringRounds, relayKiBPerTunnel, relayMicrosecondsPerClose
        case relayKernelMicrosecondsPerMessage, startedAt, units
    }

    /// Encodes the stored fields and the derived figures.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(machine, forKey: .machine)
        try c.encode(startedAt, forKey: .startedAt)
        try c.encode(Self.units, forKey: .units)
        try c.encode(relayAddress, forKey: .relayAddress)
        try c.encode(tunnelsRequested, forKey: .tunnelsRequested)
        try c.encode(rounds, forKey: .rounds)
        try c.encode(payloadSize, forKey: .payloadSize)
        try c.encode(generator, forKey: .generator)
        try c.encode(generatorThreads, forKey: .generatorThreads)
        try c.encodeIfPresent(generatorCoresUsedDuringRounds, forKey: .generatorCoresUsedDuringRounds)
        try c.encode(tunnelsOpened, forKey: .tunnelsOpened)
        try c.encode(failures, forKey: .failures)
        try c.encode(failureExamples, forKey: .failureExamples)
        try c.encode(openSeconds, forKey: .openSeconds)
        try c.encode(roundsSeconds, forKey: .roundsSeconds)
        try c.encode(closeSeconds, forKey: .closeSeconds)
        try c.encode(messagesRelayed, forKey: .messagesRelayed)
        try c.encode(roundTrips, forKey: .roundTrips)
        try c.encode(relayProcesses, forKey: .relayProcesses)
        try c.encodeIfPresent(relayBefore, forKey: .relayBefore)
        try c.encodeIfPresent(relayAfterOpen, forKey: .relayAfterOpen)
        try c.encodeIfPresent(relayAfterRounds, forKey: .relayAfterRounds)
        try c.encodeIfPresent(relayAfterClose, forKey: .relayAfterClose)
        try c.encode(tunnelsPerSecond, forKey: .tunnelsPerSecond)
        try c.encode(messagesPerSecond, forKey: .messagesPerSecond)
        try c.encodeIfPresent(relayMicrosecondsPerOpen, forKey: .relayMicrosecondsPerOpen)
        try c.encodeIfPresent(relayMicrosecondsPerMessage, forKey: .relayMicrosecondsPerMessage)
        try c.encodeIfPresent(relayKernelMicrosecondsPerMessage, forKey: .relayKernelMicrosecondsPerMessage)
        try c.encodeIfPresent(relayCoresUsedDuringRounds, forKey: .relayCoresUsedDuringRounds)
        try c.encodeIfPresent(relayKiBPerTunnel, forKey: .relayKiBPerTunnel)
        try c.encodeIfPresent(relayMicrosecondsPerClose, forKey: .relayMicrosecondsPerClose)
    }

    /// The report as pretty-printed JSON (sorted keys; seconds, milliseconds, µs and KiB as named).
    public var json: String { BenchmarkReport.prettyJSON(self) }

    /// The report for people.
    public var text: String {
        let f = BenchmarkReport.fixed
        var lines: [String] = []
        lines.append(
            "hybrid-sim bench relay: \(tunnelsRequested) tunnels × \(rounds) ping-pong rounds of \(payloadSize) bytes "
                + "against \(relayAddress), \(machine.buildConfiguration) build, \(generator) generator"
                + (generatorThreads > 0 ? " (\(generatorThreads) loops)" : ""))
        lines.append(
            "machine: \(machine.summary)")
        lines.append("")
        lines.append(
            "open:   \(tunnelsOpened)/\(tunnelsRequested) tunnels in \(f(openSeconds, 2)) s = \(f(tunnelsPerSecond, 0)) tunnels/s")
        lines.append(
            "rounds: \(messagesRelayed) messages in \(f(roundsSeconds, 2)) s = \(f(messagesPerSecond, 0)) msgs/s; "
                + "round trip ms p50 \(f(roundTrips.p50, 2)) p99 \(f(roundTrips.p99, 2)) max \(f(roundTrips.max, 2))")
        lines.append("close:  \(f(closeSeconds, 2)) s")
        if let cores = generatorCoresUsedDuringRounds {
            lines.append("generator: \(f(cores, 2)) cores busy during the rounds")
        }
        let failureText =
            failures.isEmpty
            ? "0" : failures.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
        lines.append("failures: \(failureText)")
        for (reason, example) in failureExamples.sorted(by: { $0.key < $1.key }) {
            lines.append("  first \(reason): \(example)")
        }
        lines.append("")
        if let perOpen = relayMicrosecondsPerOpen, let perMessage = relayMicrosecondsPerMessage,
            let perTunnel = relayKiBPerTunnel, let cores = relayCoresUsedDuringRounds,
            let before = relayBefore, let open = relayAfterOpen
        {
            lines.append(
                relayProcesses > 1
                    ? "relay processes (\(relayProcesses), added up, from /proc):" : "relay process (from /proc):")
            lines.append("  CPU per tunnel opened     \(f(perOpen, 1)) µs")
            lines.append(
                "  CPU per relayed message   \(f(perMessage, 2)) µs"
                    + (relayKernelMicrosecondsPerMessage.map { " (kernel \(f($0, 2)), user \(f(perMessage - $0, 2)))" } ?? ""))
            if let perClose = relayMicrosecondsPerClose {
                lines.append("  CPU per tunnel closed     \(f(perClose, 1)) µs")
            }
            lines.append("  RSS per open tunnel       \(f(perTunnel, 2)) KiB")
            lines.append("  cores busy during rounds  \(f(cores, 2)) (of \(machine.logicalCPUs))")
            lines.append(
                "  threads \(open.threads); RSS \(f(Double(before.residentBytes) / 1_048_576, 1)) MiB before, "
                    + "\(f(Double(open.residentBytes) / 1_048_576, 1)) MiB with the tunnels open"
                    + (relayAfterClose.map { ", \(f(Double($0.residentBytes) / 1_048_576, 1)) MiB after" } ?? ""))
            lines.append(
                "  open files \(before.openFiles) before, \(open.openFiles) with the tunnels open"
                    + (relayAfterClose.map { ", \($0.openFiles) after" } ?? ""))
            if let note = resolutionNote { lines.append(note) }
        } else if tunnelsOpened == 0 {
            lines.append("relay process: not measured (no tunnel opened; the failures above say why)")
        } else {
            lines.append(
                "relay process: not measured (no single readable process listens on that port, e.g. a proxy; "
                    + "pass --relay-pid PID[,PID…])")
        }
        return lines.joined(separator: "\n")
    }
}
