import ArgumentParser
import Foundation
import HybridRuntime
import HybridSim

#if canImport(Glibc)
import Glibc
#endif

/// `hybrid-sim bench hostile`: the hostile-client soak (Docs/ROBUSTNESS.md, "Hostile-client soak").
struct HostileBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hostile",
        abstract: "Attack a relay with misbehaving clients while honest QR sign-ins run through it, and measure the relay.",
        discussion: """
            For DURATION seconds, HOSTILE attacker tasks (each holding about one connection: slow-loris \
            requests, silent and half-sent sockets, garbage, unmasked, text, oversize and endlessly \
            fragmented frames after the upgrade, ping floods, connect storms on random IDs, tunnels whose \
            joiner never reads while the creator floods, unjoined /cable/new tunnels (held, or flooding \
            60 KiB messages for the peer that never comes), push channels nobody \
            contacts, and bursts beyond the per-source cap) attack one relay from 127.0.0.2…127.0.0.254, while HONEST complete QR \
            sign-ins (advert, tunnels, Noise, getAssertion, RP verification) run without pause from \
            127.0.0.1. Reports the honest sign-ins (count, success rate, p50/p99), what each attack got \
            back (HTTP status, close code, drop), and the relay's RSS and descriptors over time, read \
            from /proc. Without --url it starts `hybrid-sim relay` on a free port with the per-source \
            caps below (other limits at their defaults) and stops it afterwards. Loopback only. \
            Progress goes to stderr, the report to stdout. Exits 1 if an honest ceremony failed, the \
            relay's descriptors did not return to their baseline within SETTLE seconds after the \
            attackers stopped, its RSS did not come back within MAX-RSS-GROWTH of its baseline, or it \
            went above MAX-RSS.
            """
    )

    @Option(help: ArgumentHelp("The relay to attack (IPv4 loopback); default: start one.", valueName: "ws://host:port"))
    var url: String?

    @Option(parsing: .unconditional, help: ArgumentHelp("Measure this process as the relay (default: the one listening on the URL's port).", valueName: "pid"))
    var relayPid: Int32?

    @Option(parsing: .unconditional, help: ArgumentHelp("How long the attack and the honest sign-ins run.", valueName: "seconds"))
    var duration: Double = 60

    @Option(parsing: .unconditional, help: "Attacker tasks, each holding about one connection at a time (plus 4 source-flood tasks).")
    var hostile = 2400

    @Option(parsing: .unconditional, help: "Honest sign-ins running at once.")
    var honest = 2

    @Option(parsing: .unconditional, help: ArgumentHelp("Shortest time an attack holds its connection.", valueName: "seconds"))
    var holdMin: Double = 10

    @Option(parsing: .unconditional, help: ArgumentHelp("Longest time an attack holds its connection.", valueName: "seconds"))
    var holdMax: Double = 30

    @Option(parsing: .unconditional, help: "Connections each source-flood burst opens from one address (0: no source floods).")
    var sourceFloodBurst = 48

    @Option(parsing: .unconditional, help: ArgumentHelp("Started relay: --max-connections-per-source.", valueName: "count"))
    var maxConnectionsPerSource = 32

    @Option(parsing: .unconditional, help: ArgumentHelp("Started relay: --max-waiting-tunnels-per-source.", valueName: "count"))
    var maxWaitingTunnelsPerSource = 4

    @Option(parsing: .unconditional, help: ArgumentHelp("Wait this long after the attack for the relay's descriptors to return to the baseline.", valueName: "seconds"))
    var settle: Double = 30

    @Option(parsing: .unconditional, help: ArgumentHelp("The relay's RSS must stay below this.", valueName: "MiB"))
    var maxRss = 512

    @Option(parsing: .unconditional, help: ArgumentHelp("After the attack the relay's RSS must be back within this of its baseline.", valueName: "MiB"))
    var maxRssGrowth = 16

    @Flag(help: "Print the report as JSON.")
    var json = false

    func validate() throws {
        guard duration > 0, duration <= 86_400 else { throw ValidationError("--duration must be above 0 and at most 86400 seconds") }
        guard (1...15_000).contains(hostile) else { throw ValidationError("--hostile must be 1...15000 (20,000 descriptors per process)") }
        guard (1...64).contains(honest) else { throw ValidationError("--honest must be 1...64") }
        guard holdMin > 0, holdMax >= holdMin, holdMax <= 3600 else {
            throw ValidationError("--hold-min and --hold-max must satisfy 0 < min <= max <= 3600 seconds")
        }
        guard (0...1000).contains(sourceFloodBurst) else { throw ValidationError("--source-flood-burst must be 0...1000") }
        guard maxConnectionsPerSource >= 0, maxWaitingTunnelsPerSource >= 0 else {
            throw ValidationError("the per-source caps must be 0 (no cap) or more")
        }
        guard settle >= 0, settle <= 3600 else { throw ValidationError("--settle must be between 0 and 3600 seconds") }
        guard maxRss >= 1, maxRssGrowth >= 0 else { throw ValidationError("--max-rss must be at least 1 MiB and --max-rss-growth not negative") }
        if let url {
            // Here, not in run(): a ValidationError from run() prints the root command's usage.
            let target: WebSocketURL
            do {
                target = try WebSocketURL(parsing: url)
            } catch {
                throw ValidationError("--url \(url): \(error)")
            }
            guard target.host == "localhost" || target.host.hasPrefix("127.") else {
                throw ValidationError("--url must be an IPv4 loopback relay (attackers connect from 127.0.0.2…254)")
            }
        }
    }

    func run() async throws {
        try DescriptorCheck.requireTunnel(holder: "bench", json: json)
        // A signal stops the relay this bench started before the process ends.
        Interruption.endOnSignals { SpawnedRelay.signalEnding($0, $1, json: json) }
        try await reportingFailures(json: json, measure)
    }

    private func measure() async throws {
        let progress: @Sendable (String) -> Void = { progressLine("bench hostile: " + $0) }
        DescriptorLimit.raiseToHard()  // the started relay inherits it
        let defaults = RelayConfiguration()
        var limits: [String: String] = [
            "--max-connections": "\(defaults.maxConnections)", "--max-pending-upgrades": "\(defaults.maxPendingUpgrades)",
            "--max-tunnels": "\(defaults.maxOpenTunnels)", "--upgrade-timeout": "\(defaults.upgradeTimeout)",
            "--idle-timeout": "\(defaults.idleTimeout)", "--max-message-size": "\(defaults.maxMessageSize)",
            "--max-messages-per-peer": "\(defaults.maxMessagesPerPeer)",
        ]
        var spawned: SpawnedRelay?
        let host: String
        let port: Int
        if let url {
            let target = try WebSocketURL(parsing: url)
            (host, port) = (target.host == "localhost" ? "127.0.0.1" : target.host, target.port)
            limits = ["(relay given by --url)": "limits unknown"]
        } else {
            let relay = try SpawnedRelay.start(
                arguments: [
                    "--port", "0", "--log-level", "error",
                    "--max-connections-per-source", "\(maxConnectionsPerSource)",
                    "--max-waiting-tunnels-per-source", "\(maxWaitingTunnelsPerSource)",
                ])
            spawned = relay
            (host, port) = (relay.host, relay.port)
            limits["--max-connections-per-source"] = "\(maxConnectionsPerSource)"
            limits["--max-waiting-tunnels-per-source"] = "\(maxWaitingTunnelsPerSource)"
            progress("started hybrid-sim relay (pid \(relay.pid)) on ws://\(host):\(port)")
        }
        defer { spawned?.stop() }

        let probe = relayPid.map { ProcessProbe(pid: $0) } ?? spawned.map { ProcessProbe(pid: $0.pid) }
            ?? ProcessProbe.listening(onPort: port)
        if let probe { progress("measuring relay process \(probe.pids[0]) from /proc") }

        var configuration = HostileSoak.Configuration(
            host: host, port: port, duration: .milliseconds(Int(duration * 1000)), hostile: hostile, relay: probe)
        configuration.honestConcurrency = honest
        configuration.holdSeconds = holdMin...holdMax
        configuration.sourceFloodWorkers = sourceFloodBurst == 0 ? 0 : 4
        configuration.sourceFloodBurst = sourceFloodBurst
        configuration.settle = .milliseconds(Int(settle * 1000))
        configuration.maxRSSBytes = maxRss * 1024 * 1024
        configuration.maxRSSGrowthBytes = maxRssGrowth * 1024 * 1024
        configuration.relayLimits = limits
        configuration.rampUp = .milliseconds(Int(min(5, duration / 4) * 1000))
        let report = try await HostileSoak(configuration).run(progress: progress)
        try printResult(json ? report.json : report.text)
        if !report.passed {
            progressLine("error: bench hostile: \(report.problems.count) check(s) failed: " + report.problems.prefix(2).joined(separator: "; ")
                + (report.problems.count > 2 ? "; …" : ""))
            throw ExitCode(1)
        }
    }
}
