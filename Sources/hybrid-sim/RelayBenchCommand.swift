import ArgumentParser
import Foundation
import HybridFiles
import HybridRuntime
import HybridSim

/// `hybrid-sim bench relay`: a load generator for any relay that speaks the tunnel endpoints.
struct RelayBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay",
        abstract: "Open many tunnels through a relay, ping-pong on all of them at once, and measure the relay.",
        discussion: """
            Opens TUNNELS tunnels (a /cable/new and a /cable/connect connection each, OPEN-CONCURRENCY \
            connections at a time), holds them (HOLD seconds), runs ROUNDS ping-pong rounds on every tunnel at once \
            (a PAYLOAD-byte message from the connect side, echoed by the new side), then closes them. \
            Reports tunnels/s, messages/s, round-trip p50/p99 and every failure by reason; for a relay \
            process on this machine (found by its listening port, or --relay-pid) also the relay's CPU \
            per tunnel opened and per relayed message, its RSS per open tunnel and how many cores it \
            kept busy, read from /proc. Without --url it starts `hybrid-sim relay` on a free port with \
            limits that fit the run, and stops it afterwards. A relay holds 2 descriptors per tunnel and \
            so does this generator: a process here may hold 20,000, so one run stays under 9,900 tunnels. \
            Progress goes to stderr, the report to stdout; exit 1 if any tunnel or round failed.
            """
    )

    @Option(help: ArgumentHelp("The relay to load; default: start one.", valueName: "ws://host:port"))
    var url: String?

    @Option(parsing: .unconditional, help: "Tunnels to open and hold.")
    var tunnels = 1000

    @Option(parsing: .unconditional, help: "Ping-pong rounds on every tunnel.")
    var rounds = 10

    @Option(parsing: .unconditional, help: ArgumentHelp("Bytes in each ping and pong.", valueName: "bytes"))
    var payload = 64

    @Option(parsing: .unconditional, help: "Connections being opened at the same time.")
    var openConcurrency = 256

    @Option(parsing: .unconditional, help: ArgumentHelp("Bound on every connect, upgrade, send and receive.", valueName: "seconds"))
    var timeout: Double = 30

    @Option(parsing: .unconditional, help: ArgumentHelp("Hold every tunnel open this long before the rounds.", valueName: "seconds"))
    var hold: Double = 0

    @Option(
        help: ArgumentHelp(
            "lean: raw NIO connections, rounds run in their handlers (default); tasks: the runtime's WebSocket client and a Swift task per tunnel.",
            valueName: "lean|tasks"
        )
    )
    var generator = RelayLoadBenchmark.Generator.lean

    @Option(parsing: .unconditional, help: "Event loops of the lean generator (one per core by default).")
    var generatorThreads = ProcessInfo.processInfo.activeProcessorCount

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Measure these processes as the relay, added up (comma-separated; default: the one listening on the URL's port).",
            valueName: "pid,…"
        )
    )
    var relayPid: String?

    /// `--relay-pid` as numbers.
    private var relayPIDs: [Int32]? {
        guard let relayPid else { return nil }
        let numbers = relayPid.split(separator: ",").compactMap { Int32($0.trimmingCharacters(in: .whitespaces)) }
        return numbers.count == relayPid.split(separator: ",").count && !numbers.isEmpty ? numbers : nil
    }

    @Flag(help: "Print the report as JSON.")
    var json = false

    func validate() throws {
        guard (1...9_900).contains(tunnels) else { throw ValidationError("--tunnels must be 1...9900 (20,000 descriptors per process)") }
        guard (1...100_000).contains(rounds) else { throw ValidationError("--rounds must be 1...100000") }
        guard (1...65_536).contains(payload) else { throw ValidationError("--payload must be 1...65536 bytes") }
        guard (1...64).contains(generatorThreads) else { throw ValidationError("--generator-threads must be 1...64") }
        guard openConcurrency >= 2 else { throw ValidationError("--open-concurrency must be at least 2") }
        if relayPid != nil, relayPIDs == nil {
            throw ValidationError("--relay-pid must be one or more process IDs separated by commas")
        }
        guard hold >= 0, hold <= 3600 else { throw ValidationError("--hold must be between 0 and 3600 seconds") }
        guard timeout > 0, timeout <= 3600 else { throw ValidationError("--timeout must be above 0 and at most 3600 seconds") }
        if let url {
            // Here, not in run(): a bad URL is a usage error (64), as for bench hostile.
            do {
                _ = try WebSocketURL(parsing: url)
            } catch {
                throw ValidationError("--url \(url): \(error)")
            }
            // The bench opens /cable/new/… and /cable/connect/… itself: a path given would be ignored.
            if let path = URLComponents(string: url)?.path, !path.isEmpty, path != "/" {
                throw ValidationError("--url \(url) has a path: give the relay's base URL, ws://HOST:PORT (the bench adds /cable/…)")
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
        let progress: @Sendable (String) -> Void = { progressLine("bench relay: " + $0) }
        var spawned: SpawnedRelay?
        let host: String
        let port: Int
        if let url {
            let target = try WebSocketURL(parsing: url)
            (host, port) = (target.host, target.port)
        } else {
            let relay = try SpawnedRelay.start(
                arguments: [
                    "--port", "0", "--log-level", "error", "--max-tunnels", "\(tunnels + 16)",
                    "--max-connections", "\(2 * tunnels + 64)",
                    "--max-pending-upgrades", "\(max(RelayConfiguration().maxPendingUpgrades, openConcurrency + 64))",
                    "--max-messages-per-peer", "\(rounds + 4)", "--max-message-size", "\(max(payload, 65536))",
                    "--tunnel-lifetime", "86400", "--idle-timeout", "86400",
                ])
            spawned = relay
            (host, port) = (relay.host, relay.port)
            progress("started hybrid-sim relay (pid \(relay.pid)) on ws://\(host):\(port)")
        }
        defer { spawned?.stop() }

        let probe = relayPIDs.map(ProcessProbe.init(pids:)) ?? spawned.map { ProcessProbe(pid: $0.pid) }
            ?? (["127.0.0.1", "localhost", "::1"].contains(host) ? ProcessProbe.listening(onPort: port) : nil)
        if let probe {
            progress("measuring relay process\(probe.pids.count > 1 ? "es" : "") \(probe.pids.map(String.init).joined(separator: ", ")) from /proc")
        }

        var configuration = RelayLoadBenchmark.Configuration(host: host, port: port, tunnels: tunnels, rounds: rounds, relay: probe)
        configuration.payloadSize = payload
        configuration.openConcurrency = openConcurrency
        configuration.generator = generator
        configuration.generatorThreads = generatorThreads
        configuration.timeout = .milliseconds(Int(timeout * 1000))
        configuration.hold = .milliseconds(Int(hold * 1000))
        let report = try await RelayLoadBenchmark(configuration).run(progress: progress)
        try printResult(json ? report.json : report.text)
        if report.failureCount > 0 || report.tunnelsOpened < tunnels {
            // The report above is the result; the one final line says the run failed, as every command's does.
            let reasons = report.failures.sorted { $0.value > $1.value }.prefix(3).map { "\($0.key) ×\($0.value)" }
            progressLine("error: bench relay: \(report.tunnelsOpened) of \(tunnels) tunnel(s) opened, \(report.failureCount) failure(s)"
                + (reasons.isEmpty ? "" : " (" + reasons.joined(separator: ", ") + ")"))
            throw ExitCode(1)
        }
    }
}

/// A `hybrid-sim relay` child process on a free loopback port. Started with `posix_spawn`
/// (`ChildSpawn`), not Foundation's `Process`, whose start on Linux can crash (Docs/ROBUSTNESS.md).
///
/// Its standard input is a pipe whose only write end this process holds, and it runs with
/// `--end-with-stdin` (``StandardInputLifeline``): when this process ends in a way that stops
/// nothing (SIGKILL, a crash), the kernel closes that end and the relay stops too.
final class SpawnedRelay {
    let process: ChildSpawn
    let host: String
    let port: Int
    /// The read end of the relay's standard output, open while it runs (a closed one would make
    /// its later writes fail).
    private let output: Int32
    /// The write end of the relay's standard input: closed, the relay stops.
    private let lifeline: Int32
    var pid: Int32 { process.pid }

    private init(process: ChildSpawn, output: Int32, lifeline: Int32, host: String, port: Int) {
        self.process = process
        self.output = output
        self.lifeline = lifeline
        self.host = host
        self.port = port
    }

    deinit {
        close(output)
        close(lifeline)
    }

    /// What SIGINT, SIGTERM, SIGHUP or SIGQUIT ends `bench relay` and `bench hostile` with: the
    /// relay they started is stopped (``RunningChildren``: it has day-long timeouts), then one
    /// `error:` line (and with `--json` an `error` event).
    static func signalEnding(_ signal: String, _ status: Int32, json: Bool) -> Interruption.Ending {
        let pids = RunningChildren.stopAll(within: .seconds(3))
        let stopped = pids.isEmpty ? "" : "; stopped the relay it had started (pid \(pids.map(String.init).joined(separator: ", ")))"
        return Interruption.ending("bench interrupted by \(signal)\(stopped)", status: status, json: json)
    }

    /// Starts this executable's `relay` subcommand and waits (up to 10 s, however quiet the
    /// relay is) for its ready line.
    static func start(arguments: [String]) throws -> SpawnedRelay {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        // Both close-on-exec from the start: no other program this process starts holds an end.
        guard let (reading, writing) = ChildSpawn.pipe() else {
            throw ValidationError("cannot make a pipe for the relay: \(String(cString: strerror(errno)))")
        }
        guard let lifelinePipe = ChildSpawn.pipe() else {
            let reason = String(cString: strerror(errno))
            close(reading)
            close(writing)
            throw ValidationError("cannot make a pipe for the relay: \(reason)")
        }
        let lifeline = [lifelinePipe.read, lifelinePipe.write]
        let process: ChildSpawn
        do {
            process = try RunningChildren.spawn {
                try ChildSpawn(
                    executable: executable, arguments: ["relay", "--end-with-stdin"] + arguments,
                    environment: ProcessInfo.processInfo.environment, input: lifeline[0], output: writing, error: STDERR_FILENO)
            }
        } catch {
            for end in [reading, writing] + lifeline { close(end) }
            throw error
        }
        close(writing)
        close(lifeline[0])
        let deadline = ContinuousClock.now + .seconds(10)
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        // The relay's output ended (it exited, usually): its exit status says why.
        var outputEnded = false
        while process.isRunning {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { break }
            var watched = pollfd(fd: reading, events: Int16(POLLIN), revents: 0)
            let ready = poll(&watched, 1, max(1, FileFailure.milliseconds(left)))
            if ready < 0, errno == EINTR { continue }
            guard ready > 0 else { continue }
            let count = read(reading, &chunk, chunk.count)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else {
                outputEnded = true
                break
            }
            buffer += chunk[..<count]
            let text = String(decoding: buffer, as: UTF8.self)
            if let range = text.range(of: "ws://"), let line = text[range.lowerBound...].split(separator: "\n").first,
                text[range.lowerBound...].contains("\n")
            {
                let address = line.dropFirst("ws://".count)
                if let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]) {
                    return SpawnedRelay(
                        process: process, output: reading, lifeline: lifeline[1], host: String(address[..<colon]), port: port)
                }
            }
        }
        // The end of a child that exited is learned on its own thread, a moment after its output
        // ended: waited for (2 s at most), so that the message gives its status.
        let ended = DispatchSemaphore(value: 0)
        process.onEnd { _ in ended.signal() }
        if !outputEnded { process.signal(SIGTERM) }
        _ = ended.wait(timeout: .now() + 2)
        close(reading)
        close(lifeline[1])
        let why: String
        switch process.ended {
        case .exited(let status)? where outputEnded: why = "it exited with status \(status)"
        case .killed(let signal)? where outputEnded: why = "it was killed by signal \(signal)"
        default: why = "no ready line within 10 s"
        }
        throw ValidationError("the relay did not start (\(why))")
    }

    /// SIGTERM, then waits (up to 10 s, then SIGKILL) for the exit.
    func stop() {
        guard process.isRunning else { return }
        let ended = DispatchSemaphore(value: 0)
        process.onEnd { _ in ended.signal() }
        process.signal(SIGTERM)
        if ended.wait(timeout: .now() + 10) == .timedOut {
            process.signal(SIGKILL)
            _ = ended.wait(timeout: .now() + 2)
        }
    }
}

extension RelayLoadBenchmark.Generator: ExpressibleByArgument {}
