import Foundation

/// What a ``HostileSoak`` measured, as text (``text``) or JSON (``json``); ``passed`` is the verdict.
package struct HostileSoakReport: Sendable, Codable {
    /// One sample of the relay during the run.
    package struct Point: Sendable, Codable, Hashable {
        /// Seconds since the attack started.
        package var seconds: Double
        /// Attacker connections open at that moment.
        package var hostileOpen: Int
        /// The relay's RSS, in bytes (no relay probe: `nil`).
        package var residentBytes: Int?
        /// The relay's open descriptors.
        package var openFiles: Int?
    }

    /// What one attack got back.
    package struct AttackFigures: Sendable, Codable, Hashable {
        /// The attack (``HostileAttack`` raw value).
        package var attack: String
        /// Connections (or connection attempts) it made.
        package var connections: Int
        /// How they ended, by label ("HTTP 429", "close 1009", "dropped (EOF)", …).
        package var outcomes: [String: Int]
        /// Extra counters (pings sent, pongs received, fragments sent, …).
        package var counters: [String: Int]
        /// Seconds from connect to the relay's drop, median, for the dropped ones.
        package var dropSecondsMedian: Double?
        /// Same, largest.
        package var dropSecondsMax: Double?
    }

    /// Planned duration, in seconds.
    package var durationSeconds: Double
    /// Attacker tasks (weighted attacks plus source floods).
    package var attackerTasks: Int
    /// Honest sign-ins at once.
    package var honestConcurrency: Int
    /// The relay's limits, flag → value.
    package var relayLimits: [String: String]
    /// The relay's RSS bound, in bytes.
    package var maxRSSBytes: Int
    /// How far above its baseline the relay's RSS may end, in bytes.
    package var maxRSSGrowthBytes: Int
    /// How long the attack phase really took (until every attacker let go), in seconds.
    package var attackSeconds = 0.0

    /// Completed honest sign-ins (registrations not counted).
    package var honestSignIns = 0
    /// Honest registrations (one per honest loop).
    package var honestRegistrations = 0
    /// Failed honest ceremonies, by error.
    package var honestFailures: [String: Int] = [:]
    /// Latency of the honest sign-ins, in milliseconds.
    package var honestLatency = LatencySummary(milliseconds: [])

    /// Attacker connections made in all.
    package var hostileConnections = 0
    /// Most attacker connections open at once.
    package var hostilePeakOpen = 0
    /// Fewest attacker connections open at once in the steady state (from 10 s after the ramp-up to the end).
    package var hostileSteadyMin = 0
    /// Mean attacker connections open in the steady state.
    package var hostileSteadyMean = 0.0
    /// Per attack.
    package var attacks: [AttackFigures] = []

    /// The relay before the attack (after one honest warm-up sign-in).
    package var relayBaseline: ProcessProbe.Sample?
    /// The relay after the attack, once its descriptors were back at the baseline (or the settle time passed).
    package var relayEnd: ProcessProbe.Sample?
    /// Largest RSS sampled, in bytes.
    package var relayPeakResidentBytes: Int?
    /// Most descriptors sampled.
    package var relayPeakOpenFiles: Int?
    /// Every sample.
    package var series: [Point] = []

    /// Why the soak failed; empty when it passed.
    package var problems: [String] = []
    /// Every honest sign-in succeeded, the relay's RSS stayed bounded, and its descriptors and RSS returned to the baseline.
    package var passed: Bool { problems.isEmpty }

    init(configuration: HostileSoak.Configuration) {
        durationSeconds = configuration.duration.benchmarkSeconds
        attackerTasks = configuration.hostile + configuration.sourceFloodWorkers
        honestConcurrency = configuration.honestConcurrency
        relayLimits = configuration.relayLimits
        maxRSSBytes = configuration.maxRSSBytes
        maxRSSGrowthBytes = configuration.maxRSSGrowthBytes
    }

    mutating func fill(
        honest: (samples: [Double], failures: [String: Int], registrations: Int),
        tally: (attacks: [HostileAttack: HostileTally.Attack], opened: Int, peakOpen: Int),
        steadyFrom: Duration, until end: Duration
    ) {
        honestSignIns = honest.samples.count
        honestRegistrations = honest.registrations
        honestFailures = honest.failures
        honestLatency = LatencySummary(milliseconds: honest.samples)
        hostileConnections = tally.opened
        hostilePeakOpen = tally.peakOpen
        attacks = tally.attacks.sorted { $0.key < $1.key }.map { attack, figures in
            let drops = figures.dropSeconds.sorted()
            return AttackFigures(
                attack: attack.rawValue, connections: figures.outcomes.values.reduce(0, +), outcomes: figures.outcomes,
                counters: figures.counters,
                dropSecondsMedian: drops.isEmpty ? nil : LatencySummary.percentile(50, ofSorted: drops),
                dropSecondsMax: drops.last)
        }
        let steady = series.filter { $0.seconds >= steadyFrom.benchmarkSeconds && $0.seconds <= end.benchmarkSeconds - 1 }
        hostileSteadyMin = steady.map(\.hostileOpen).min() ?? 0
        hostileSteadyMean = steady.isEmpty ? 0 : Double(steady.map(\.hostileOpen).reduce(0, +)) / Double(steady.count)
        relayPeakResidentBytes = series.compactMap(\.residentBytes).max()
        relayPeakOpenFiles = series.compactMap(\.openFiles).max()
    }

    mutating func check() {
        let failed = honestFailures.values.reduce(0, +)
        if failed > 0 { problems.append("\(failed) honest ceremon\(failed == 1 ? "y" : "ies") failed") }
        if honestSignIns == 0 { problems.append("no honest sign-in completed") }
        if let baseline = relayBaseline, let end = relayEnd, end.openFiles > baseline.openFiles {
            problems.append("relay descriptors at \(end.openFiles) after the settle time, baseline \(baseline.openFiles)")
        }
        if let baseline = relayBaseline, let end = relayEnd, end.residentBytes > baseline.residentBytes + maxRSSGrowthBytes {
            problems.append(
                "relay RSS ended at \(Self.mebibytes(end.residentBytes)), more than \(Self.mebibytes(maxRSSGrowthBytes)) above its baseline of \(Self.mebibytes(baseline.residentBytes))")
        }
        if let peak = relayPeakResidentBytes, peak > maxRSSBytes {
            problems.append("relay RSS peaked at \(Self.mebibytes(peak)), above the bound of \(Self.mebibytes(maxRSSBytes))")
        }
    }

    // MARK: - Output

    /// The report as JSON (sorted keys).
    package var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// The report for a person.
    package var text: String {
        var lines: [String] = []
        let failed = honestFailures.values.reduce(0, +)
        let total = honestSignIns + failed
        lines.append(
            "hostile soak: \(Self.number(attackSeconds)) s, \(attackerTasks) attacker tasks, \(honestConcurrency) honest sign-in loops")
        if !relayLimits.isEmpty {
            lines.append("relay limits: " + relayLimits.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
        let rate = total == 0 ? 0 : Double(honestSignIns) / Double(total) * 100
        lines.append(
            "honest sign-ins: \(honestSignIns) of \(total) succeeded (\(String(format: "%.2f", rate)) %), "
                + "p50 \(Self.number(honestLatency.p50)) ms, p99 \(Self.number(honestLatency.p99)) ms, "
                + "max \(Self.number(honestLatency.max)) ms; \(honestRegistrations) registrations")
        for (reason, count) in honestFailures.sorted(by: { $0.value > $1.value }) {
            lines.append("  failed \(count)×: \(reason)")
        }
        lines.append(
            "hostile connections: \(hostileConnections) made; open at once: peak \(hostilePeakOpen), "
                + "steady-state min \(hostileSteadyMin), mean \(Self.number(hostileSteadyMean))")
        if let baseline = relayBaseline, let end = relayEnd {
            lines.append(
                "relay RSS: baseline \(Self.mebibytes(baseline.residentBytes)), peak \(Self.mebibytes(relayPeakResidentBytes ?? 0)), "
                    + "end \(Self.mebibytes(end.residentBytes)) (bounds: peak \(Self.mebibytes(maxRSSBytes)), end baseline + \(Self.mebibytes(maxRSSGrowthBytes)))")
            lines.append(
                "relay descriptors: baseline \(baseline.openFiles), peak \(relayPeakOpenFiles ?? 0), end \(end.openFiles); "
                    + "relay CPU \(Self.number(end.cpuSeconds - baseline.cpuSeconds)) s")
        } else {
            lines.append("relay: not measured (no process to read)")
        }
        lines.append("what each attack got back (connections: outcome × count):")
        for figures in attacks {
            let outcomes = figures.outcomes.sorted { $0.value > $1.value }.map { "\($0.key) ×\($0.value)" }
            var line = "  \(figures.attack) (\(figures.connections)): " + outcomes.joined(separator: ", ")
            if let median = figures.dropSecondsMedian, let max = figures.dropSecondsMax {
                line += "; dropped after \(Self.number(median)) s median, \(Self.number(max)) s max"
            }
            if !figures.counters.isEmpty {
                line += "; " + figures.counters.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            }
            lines.append(line)
        }
        let every = max(1, series.count / 12)
        lines.append("over time (t s: hostile open, relay RSS, relay fds):")
        for (index, point) in series.enumerated() where index % every == 0 || index == series.count - 1 {
            let rss = point.residentBytes.map(Self.mebibytes) ?? "-"
            lines.append("  \(Self.number(point.seconds)): \(point.hostileOpen), \(rss), \(point.openFiles.map(String.init) ?? "-")")
        }
        lines.append(passed ? "verdict: PASS" : "verdict: FAIL: " + problems.joined(separator: "; "))
        return lines.joined(separator: "\n")
    }

    static func mebibytes(_ bytes: Int) -> String {
        String(format: "%.1f MiB", Double(bytes) / 1_048_576)
    }

    static func number(_ value: Double) -> String {
        String(format: value >= 100 ? "%.0f" : "%.1f", value)
    }
}
