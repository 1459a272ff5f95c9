import ArgumentParser
import CTAP2
import Foundation
import HybridFiles
import HybridRuntime
import HybridSim
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `hybrid-sim relay`: the caBLE tunnel service on loopback (Docs/RELAY.md).
struct RelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay",
        abstract: "Run the caBLE tunnel service (WebSocket relay) on loopback.",
        discussion: """
            When ready, prints one line on stdout containing ws://HOST:PORT, then relays tunnels until \
            SIGINT, SIGTERM, SIGHUP or SIGQUIT, closes every tunnel with WebSocket close code 1001, logs \
            what it did and exits 0. SIGUSR1 prints a status line on stderr (connections, tunnels and \
            waiting contacts open now; what it did since its start) and the relay goes on; \
            --status-interval prints it periodically, and --json puts JSON events on stdout for scripts. \
            It raises its open-file limit to the hard one and lowers \
            --max-connections to what that limit holds, with a warning. \
            Endpoints: GET /cable/new/{tunnel ID}, /cable/connect/{routing ID}/{tunnel ID}, \
            /cable/contact/{contact ID} and /cable/listen/{contact ID} (linked phones, Docs/LINKING.md). \
            Logs go to stderr; see Docs/RELAY.md.
            """
    )

    /// The relay's defaults, written once in `RelayConfiguration`; the options below show them.
    private static let defaults = RelayConfiguration()

    @Option(help: "Loopback address to bind: 127.0.0.1 (or another 127.x.y.z), ::1 (also written [::1]) or localhost.")
    var host = "127.0.0.1"

    @Option(parsing: .unconditional, help: "TCP port to listen on; 0 picks a free port (the ready line shows it).")
    var port = ProgramDefaults.relayPort

    @Option(parsing: .unconditional, help: ArgumentHelp("Close a tunnel with 1001 this many seconds after it was opened.", valueName: "seconds"))
    var tunnelLifetime = Self.defaults.tunnelLifetime.secondsValue

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Close a tunnel with 1001 after this many seconds without a relayed message.",
            valueName: "seconds"
        )
    )
    var idleTimeout = Self.defaults.idleTimeout.secondsValue

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Largest message either peer may send; larger closes the tunnel with 1009.",
            valueName: "bytes"
        )
    )
    var maxMessageSize = Self.defaults.maxMessageSize

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Messages each peer may send per tunnel (buffered ones too); one more closes with 1008.",
            valueName: "count"
        )
    )
    var maxMessagesPerPeer = Self.defaults.maxMessagesPerPeer

    @Option(parsing: .unconditional, help: ArgumentHelp("Tunnels open at once; /cable/new beyond this is answered 503.", valueName: "count"))
    var maxTunnels = Self.defaults.maxOpenTunnels

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "TCP connections open at once; one more is answered 503 before its request is read.",
            valueName: "count"
        )
    )
    var maxConnections = Self.defaults.maxConnections

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Connections still in their HTTP upgrade at once; one more is answered 503 before its request is read (0: no cap).",
            valueName: "count"
        )
    )
    var maxPendingUpgrades = Self.defaults.maxPendingUpgrades

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Connections open at once from one source IP address; one more is answered 429 before its request is read (0: no cap).",
            valueName: "count"
        )
    )
    var maxConnectionsPerSource = Self.defaults.maxConnectionsPerSource

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Tunnels one source IP address may have open that nobody joined yet; /cable/new or /cable/contact beyond is answered 429 (0: no cap).",
            valueName: "count"
        )
    )
    var maxWaitingTunnelsPerSource = Self.defaults.maxWaitingTunnelsPerSource

    @Option(
        name: .customLong("allow-origin"),
        help: ArgumentHelp(
            "Also accept requests from web pages of this Origin (repeatable; * accepts any). Requests without Origin or with a ws:// or wss:// Origin (native clients) are always accepted; other origins get 403.",
            valueName: "origin"
        )
    )
    var allowOrigins: [String] = []

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Drop a connection that has not completed its HTTP request after this long (one that began it is answered 408).",
            valueName: "seconds"
        )
    )
    var upgradeTimeout = Self.defaults.upgradeTimeout.secondsValue

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "How long to wait for a peer's answer to a close frame before dropping it.",
            valueName: "seconds"
        )
    )
    var closeTimeout = Self.defaults.closeHandshakeTimeout.secondsValue

    @Option(
        help: ArgumentHelp(
            "Start every routing ID with these 1 or 2 bytes (hex), so a proxy can route /cable/connect to this instance.",
            valueName: "hex"
        )
    )
    var routingIDPrefix: String?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Event loops (threads) to run tunnels on, each owning the tunnels whose IDs name it; 0 = one per core.",
            valueName: "count"
        )
    )
    var eventLoops = 0

    @Option(help: "Log level on stderr.")
    var logLevel: Logger.Level = .info

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "A /cable/contact that arrives within this long after the start, for a contact ID no phone has announced, is answered 504 (not listening) after the 3 s contact wait, not 410 (unknown, which makes a desktop delete its link): the relay forgets contact IDs when it restarts; 0: 410 from the start (Docs/LINKING.md).",
            valueName: "seconds"))
    var contactGrace = Self.defaults.contactGraceAfterStart.secondsValue

    @Option(
        help: ArgumentHelp(
            "Keep the contact IDs linked phones listened on and revoked in this file across restarts (written a second after each change and at every stop, mode 0600; one relay per file): after a restart a phone that listened before is still known, so its desktops get 504, not 410, however late (Docs/LINKING.md). (default: in memory only)",
            valueName: "file"))
    var contacts: String?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Also print the status line (as SIGUSR1 does) every this many seconds, 0.1 to 86400. (default: only on SIGUSR1)",
            valueName: "seconds"))
    var statusInterval: Double?

    @Flag(
        help: ArgumentHelp(
            "Print JSON events on stdout, one per line: listening (the ready line, with its url), status (on SIGUSR1 and every --status-interval) and stopped, each with the relay's counters, or error if it cannot start (Docs/CLI.md). Logs and status lines stay on stderr."))
    var json = false

    @Option(
        help: ArgumentHelp(
            "Record every tunnel into this directory (one .hsrec file per tunnel, for hybrid-sim inspect).",
            valueName: "dir"
        )
    )
    var record: String?

    @Option(
        name: .customLong("fault"),
        help: ArgumentHelp(
            "Inject a fault into relayed tunnel messages (repeatable): MODE[=VALUE][:RATE][@to-phone|@to-desktop|@both][#N], MODE one of drop, delay, duplicate, corrupt, reorder, truncate, close; e.g. drop:0.5@to-phone, delay=300ms, close=4000#2 (Docs/FAULTS.md).",
            valueName: "spec"
        )
    )
    var faults: [String] = []

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Seed of the --fault decisions: every tunnel hits the same messages, so a run is reproducible. (default: a seed per tunnel, logged)",
            valueName: "n"
        )
    )
    var faultSeed: UInt64?

    @Flag(
        name: .customLong("end-with-stdin"),
        help: ArgumentHelp(
            "Stop as on SIGTERM once standard input ends: bench relay and bench hostile start their relay so, holding the pipe's only write end, so it does not outlive them (Docs/CLI.md).",
            visibility: .hidden))
    var endWithStandardInput = false

    /// `--routing-id-prefix` as bytes: 2 or 4 hex digits.
    private var routingPrefixBytes: [UInt8]? {
        guard let text = routingIDPrefix else { return nil }
        return Hex.decode(text, byteCount: 1) ?? Hex.decode(text, byteCount: 2)
    }

    mutating func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0…65535") }
        for (name, value) in [
            ("--tunnel-lifetime", tunnelLifetime), ("--idle-timeout", idleTimeout),
            ("--upgrade-timeout", upgradeTimeout), ("--close-timeout", closeTimeout),
        ] where !(value > 0 && value <= 86_400) {
            throw ValidationError("\(name) must be a number of seconds above 0 and at most 86400")
        }
        for (name, value) in [
            ("--max-message-size", maxMessageSize), ("--max-messages-per-peer", maxMessagesPerPeer),
            ("--max-tunnels", maxTunnels),
        ] where value < 1 {
            throw ValidationError("\(name) must be at least 1")
        }
        guard maxConnections >= 2 else {
            throw ValidationError("--max-connections must be at least 2: a tunnel is two connections, the phone's and the desktop's")
        }
        if let statusInterval, !(statusInterval >= 0.1 && statusInterval <= 86_400) {
            throw ValidationError("--status-interval must be 0.1 to 86400 seconds")
        }
        guard contactGrace >= 0, contactGrace <= 86_400 else {
            throw ValidationError("--contact-grace must be 0 (none) to 86400 seconds")
        }
        guard (0...256).contains(eventLoops) else { throw ValidationError("--event-loops must be 0...256") }
        for (name, value) in [
            ("--max-pending-upgrades", maxPendingUpgrades), ("--max-connections-per-source", maxConnectionsPerSource),
            ("--max-waiting-tunnels-per-source", maxWaitingTunnelsPerSource),
        ] where value < 0 {
            throw ValidationError("\(name) must be 0 (no cap) or more")
        }
        guard maxMessageSize <= 1 << 30 else { throw ValidationError("--max-message-size must be at most 1 GiB") }
        // An Origin header is never empty or spaced: such a value would silently match nothing.
        if let bad = allowOrigins.first(where: { $0.isEmpty || $0.contains(where: \.isWhitespace) }) {
            throw ValidationError("--allow-origin '\(bad)': give an origin as a browser sends it (https://example.com) or *")
        }
        // As the Origin header a browser sends them, once: run() takes them as they are then.
        allowOrigins = try allowOrigins.map { $0 == "*" ? $0 : try Self.allowedOrigin($0) }
        _ = try FaultOptions.relayFaults(faults, seed: faultSeed, flag: "--fault")
        if routingIDPrefix != nil, routingPrefixBytes == nil {
            throw ValidationError("--routing-id-prefix must be 2 or 4 hex digits (1 or 2 of the routing ID's 3 bytes)")
        }
        // Here, not in run(): a ValidationError from run() prints the root command's usage.
        if let record {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: record, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw ValidationError("--record \(record): not an existing directory")
            }
            // Found out now, not as one warning per tunnel with every recording lost.
            guard access(record, W_OK | X_OK) == 0 else {
                throw ValidationError("--record \(record): this user cannot write in that directory (\(String(cString: strerror(errno))))")
            }
        }
        if contacts?.isEmpty == true { throw ValidationError("--contacts needs a file name") }
    }

    /// An `--allow-origin` value as the `Origin` header a browser sends it: an http(s) origin is
    /// serialized (`https://ci.example.org/` and `https://ci.example.org:443` are
    /// `https://ci.example.org`, which is what arrives); another scheme (`chrome-extension://…`) and
    /// `null` (a file:// page, a sandboxed frame) are kept as given. A host without a scheme, or an http(s) URL with a path, query or user, never
    /// arrives as an Origin: refused, saying what to give.
    static func allowedOrigin(_ value: String) throws -> String {
        if let origin = WebOrigin.normalized(value) {  // compared exactly: an IPv6 address in the browser's form only
            if let problem = WebOrigin.ipv6FormProblem(flag: "--allow-origin", value: value, origin: origin) { throw ValidationError(problem) }
            return origin
        }
        if value.lowercased() == "null" { return "null" }  // what a browser sends for a file:// page or a sandboxed frame
        let components = URLComponents(string: value)
        guard let scheme = components?.scheme?.lowercased(), value.contains("://") else {
            throw ValidationError(
                "--allow-origin '\(value)' has no scheme, and a browser's Origin always has one: give https://\(value) (or http://…)")
        }
        if scheme == "http" || scheme == "https" {
            // The origin inside what was given, when it has a host: what the browser would send.
            let origin = components?.host.flatMap { host in
                host.isEmpty ? nil : "\(scheme)://\(host.lowercased())\(components?.port.map { ":\($0)" } ?? "")"
            }
            throw ValidationError(
                "--allow-origin '\(value)' is not an origin a browser sends (scheme://host[:port], no path, query or user): give it as \(origin ?? "https://example.com")")
        }
        return value
    }

    func run() async throws {
        let logger = CommandLogging.logger(label: "hybrid-sim.relay", level: logLevel)

        var configuration = RelayConfiguration()
        configuration.tunnelLifetime = .seconds(tunnelLifetime)
        configuration.maxMessageSize = maxMessageSize
        configuration.maxMessagesPerPeer = maxMessagesPerPeer
        configuration.maxOpenTunnels = maxTunnels
        configuration.idleTimeout = .seconds(idleTimeout)
        configuration.upgradeTimeout = .seconds(upgradeTimeout)
        configuration.closeHandshakeTimeout = .seconds(closeTimeout)
        configuration.contactGraceAfterStart = .milliseconds(Int64((contactGrace * 1000).rounded()))
        configuration.maxConnections = maxConnections
        configuration.eventLoops = eventLoops
        configuration.maxPendingUpgrades = maxPendingUpgrades
        configuration.maxConnectionsPerSource = maxConnectionsPerSource
        configuration.maxWaitingTunnelsPerSource = maxWaitingTunnelsPerSource
        configuration.originPolicy = RelayOriginPolicy(allowedOrigins: Set(allowOrigins))
        configuration.routingIDPrefix = routingPrefixBytes ?? []
        configuration.faults = try FaultOptions.relayFaults(faults, seed: faultSeed, flag: "--fault")
        if let record { configuration.recordDirectory = record }
        // The contact file is read, and locked for this process's life, before anything listens: a
        // damaged one is bad input (2, the file left as it is); one another relay holds, or the
        // machine failing (a full disk, the open-file limit), is 1.
        var contactFile: RelayContactFile?
        if let contacts {
            do {
                contactFile = try RelayContactFile.open(path: contacts)
            } catch {
                let kind = error.code == .locked ? ProgramFailure.Kind.failed : error.failureKind
                throw failureLine("--contacts: \(error)\(error.advice)", kind: kind.rawValue, status: kind.exitCode, json: json)
            }
            configuration.contactPersistence = contactFile?.persistence
        }
        defer { withExtendedLifetime(contactFile) {} }
        try fitConnections(&configuration, logger: logger)
        let relay = TunnelRelay(configuration: configuration, host: host, port: port, logger: logger)
        let output = RelayStatusOutput(json: json)
        // `kill -USR1 PID`: what the relay holds now and has done, on stderr whatever --log-level
        // says (it was asked for), without stopping it.
        SignalRouter.routeStatus { [relay] in output.status(relay.statistics) }
        // Catch the signals before announcing readiness, so a signal right after the line is not lost.
        let signals = TerminationSignals()
        if endWithStandardInput { StandardInputLifeline.watch() }
        // A failure is one line, as every other program's runtime failure: "error: <reason>". A
        // port it cannot bind (in use, below 1024 without the privilege) is exit 6, as for `rp`
        // and `desktop`; a host that is not loopback is a bad command line (64).
        let endpoint: RelayEndpoint
        do {
            endpoint = try await relay.start()
        } catch let error as RuntimeError where error.code == .invalidAddress {
            throw errorLine("\(error)", status: 64)
        } catch let error as RuntimeError where error.code == .bindFailed {
            let advice = BindConflict.portAdvice(errno: error.systemErrno, port: port, flag: "--port")
            throw failureLine("\(error)\(advice)", kind: ProgramFailure.Kind.network.rawValue, status: 6, json: json)
        } catch {
            throw failureLine("\(error)", kind: ProgramFailure.Kind.failed.rawValue, status: 1, json: json)
        }
        if configuration.faults.isEnabled {
            logger.warning(
                "fault injection: \(configuration.faults.rules.map(\.description).joined(separator: " "))\(faultSeed.map { ", seed \($0)" } ?? "") (tunnel messages are no longer relayed verbatim)")
        }
        // One write(2), unbuffered: a harness reading a pipe sees the line at once.
        output.listening(url: endpoint.url)
        let periodic = statusInterval.map { seconds in
            Task { [relay] in
                let interval = Duration.milliseconds(Int64((seconds * 1000).rounded()))
                while (try? await Task.sleep(for: interval)) != nil { output.status(relay.statistics) }
            }
        }
        // A second signal while the tunnels close (a peer that never answers the close frame holds
        // the shutdown for --close-timeout): the operator wants out now, as a second Ctrl-C does.
        // Set before the first arrives, so none is missed; `_exit`, as the line is written already.
        let remembersContacts = contacts != nil
        signals.onRepeat { [relay, json] number in
            let open = relay.statistics.openConnections
            let status = 128 + number
            let lost = remembersContacts ? "; the contact memory may not be saved" : ""
            let exit = failureLine(
                "received \(SignalRouter.name(number)) during the shutdown, while \(open) connection(s) close: stopped at once, their peers see the connection drop\(lost)",
                kind: "interrupted", status: status, json: json)
            StandardStream.error.drain(timeout: .seconds(2))
            _exit(exit.rawValue)
        }
        // The status handler stays through the shutdown: a SIGUSR1 then still only asks for status.
        let received = await signals.wait()
        periodic?.cancel()
        logger.info("received \(SignalRouter.name(received)), shutting down")
        await relay.shutdown()
        let statistics = relay.statistics
        logger.info("since its start: \(RelayStatusOutput.summary(statistics))")
        output.stopped(statistics, signal: SignalRouter.name(received))
        // The phones it learned would be forgotten at the next start: not a clean stop.
        if let problem = relay.contactSaveProblem {
            throw failureLine(
                RelayStatusOutput.contactsNotSaved(problem, file: contacts ?? "the file"),
                kind: ProgramFailure.Kind.failed.rawValue, status: 1, json: json)
        }
    }

    /// Raises the open-file limit to the hard one and, if `--max-connections` still does not fit
    /// under it, lowers it with a warning: past the limit `accept` fails and clients wait until
    /// they time out, where a connection over `--max-connections` gets a fast 503.
    /// A limit that leaves no room for one tunnel (two connections) is a failure, not a relay
    /// that starts, says it listens, and refuses every tunnel's second connection.
    private func fitConnections(_ configuration: inout RelayConfiguration, logger: Logger) throws {
        guard
            let limit = try DescriptorCheck.require(
                2, holder: "relay", need: "a tunnel needs 2",
                advice: "ulimit -n 1024 holds \(DescriptorLimit.connectionsFitting(1024) / 2) tunnels", json: json)
        else { return }
        let fits = DescriptorLimit.connectionsFitting(limit)
        guard configuration.maxConnections > fits else { return }
        logger.warning(
            "the open-file limit (ulimit -n) is \(limit): --max-connections lowered from \(configuration.maxConnections) to \(fits) (\(fits / 2) tunnel(s)), so connections beyond it get a 503 instead of an accept that fails")
        configuration.maxConnections = fits
    }
}

/// `--fault` / `desktop --relay-fault` values checked by the argument parser's rules (exit 64).
enum FaultOptions {
    /// The parsed rules, or a `ValidationError` naming the bad one.
    static func relayFaults(_ specs: [String], seed: UInt64?, flag: String) throws -> RelayFaults {
        if seed != nil, specs.isEmpty { throw ValidationError("\(flag)-seed needs at least one \(flag)") }
        do {
            return try RelayFaults(parsing: specs, seed: seed)
        } catch {
            throw ValidationError("\(flag): \(error)")
        }
    }
}

extension Duration {
    /// The duration in seconds, for option defaults given in seconds.
    fileprivate var secondsValue: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
