import ArgumentParser
import Foundation
import HybridRuntime

/// `hybrid-sim bench`: benchmarks that print figures (Docs/BENCHMARKS.md). Without a subcommand it
/// runs `signin`, so `hybrid-sim bench --count 200` keeps working.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Benchmarks: loopback QR sign-ins (default), relay load, and the hostile-client soak.",
        subcommands: [SignInBenchCommand.self, RelayBenchCommand.self, HostileBenchCommand.self],
        defaultSubcommand: SignInBenchCommand.self
    )
}

extension SignInBenchmark.Loops: ExpressibleByArgument {}

/// `hybrid-sim bench [signin]`: times complete loopback QR sign-ins and the cryptography they need.
struct SignInBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signin",
        abstract: "Time complete QR sign-ins through a loopback relay and the crypto they need.",
        discussion: """
            Starts a relay on an ephemeral loopback port, registers one passkey on a simulated phone, \
            runs the warm-up sign-ins, then times COUNT sign-ins one after another (QR session, UDP \
            advert, WebSocket tunnels, Noise handshake, getAssertion, relying-party verification). \
            Then times, with swift-crypto, every cryptographic operation one sign-in performs and \
            prints p50/p99 latency, the crypto floor per sign-in and the ratio of the two. Progress \
            goes to stderr, the report to stdout. Build with -c release for representative figures.
            """
    )

    @Option(parsing: .unconditional, help: "Sign-ins to time.")
    var count = 100

    @Option(parsing: .unconditional, help: "Untimed sign-ins before the timed ones.")
    var warmup = 5

    @Flag(help: "Print the report as JSON (times in milliseconds unless named nanoseconds).")
    var json = false

    /// Swift concurrency's global executor: where tasks run that prefer no executor (with `--loops
    /// one` the harness's drivers prefer its loop either way, ``HybridHarness``).
    enum Executor: String, ExpressibleByArgument, CaseIterable {
        /// SwiftNIO's event loops serve as Swift concurrency's global executor, so such a task
        /// resumes on the thread that read its message (no hop to another thread pool).
        case nio
        /// Swift concurrency's own thread pool; such a task crosses between it and the loops.
        case swift
    }

    @Option(help: ArgumentHelp("Swift concurrency's global executor: nio (the event loops) or swift (Swift's pool). With --loops one the drivers run on the harness's loop either way (their task executor).", valueName: "executor"))
    var executor = Executor.nio

    @Option(help: ArgumentHelp("Event loops of the relay and the sign-ins' sockets: one (a sign-in on one thread) or all (one per core).", valueName: "loops"))
    var loops = SignInBenchmark.Loops.one

    func validate() throws {
        guard count >= 1 else { throw ValidationError("--count must be at least 1") }
        guard warmup >= 0 else { throw ValidationError("--warmup must not be negative") }
    }

    func run() async throws {
        try DescriptorCheck.requireTunnel(holder: "bench", json: json)
        try await reportingFailures(json: json, measure)
    }

    private func measure() async throws {
        var executorUsed = executor
        if executor == .nio, !RuntimeExecutor.runTasksOnEventLoops() {
            progressLine("could not make the event loops the global executor; using Swift's pool")
            executorUsed = .swift
        }
        progressLine("executor: \(executor.rawValue), loops: \(loops.rawValue)")
        let benchmark = SignInBenchmark(count: count, warmup: warmup, loops: loops)
        var report = try await BenchmarkReport.measure(benchmark) { line in
            progressLine(line)
        }
        report.executor = executorUsed.rawValue
        try printResult(json ? report.json : report.text)
    }
}
