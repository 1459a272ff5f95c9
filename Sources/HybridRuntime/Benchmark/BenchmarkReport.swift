import Foundation

/// The machine a benchmark ran on, so figures are never quoted without it.
public struct MachineInfo: Sendable, Hashable, Codable {
    /// CPU model (`model name` in /proc/cpuinfo), or "unknown".
    public var cpuModel: String
    /// Processors this process may use (what `nproc` prints).
    public var logicalCPUs: Int
    /// Machine architecture (what `uname -m` prints).
    public var architecture: String
    /// Operating system and kernel release.
    public var operatingSystem: String
    /// "debug" or "release": how this code was compiled.
    public var buildConfiguration: String

    /// One line: model, CPUs, architecture, operating system.
    public var summary: String { "\(cpuModel), \(logicalCPUs) CPUs, \(architecture), \(operatingSystem)" }

    /// Describes the machine this process runs on.
    public static var current: MachineInfo {
        MachineInfo(
            cpuModel: cpuModelName() ?? "unknown",
            logicalCPUs: ProcessInfo.processInfo.activeProcessorCount,
            architecture: architectureName,
            operatingSystem: operatingSystemName(),
            buildConfiguration: buildConfigurationName)
    }

    private static var buildConfigurationName: String {
        #if DEBUG
        return "debug"
        #else
        return "release"
        #endif
    }

    private static var architectureName: String {
        #if arch(x86_64)
        return "x86_64"
        #elseif arch(arm64)
        return "aarch64"
        #else
        return "unknown"
        #endif
    }

    private static func cpuModelName() -> String? {
        guard let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("model name") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return nil
    }

    private static func operatingSystemName() -> String {
        #if os(Linux)
        let release = (try? String(contentsOfFile: "/proc/sys/kernel/osrelease", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines)
        return "Linux " + (release ?? "")
        #else
        return ProcessInfo.processInfo.operatingSystemVersionString
        #endif
    }
}

/// What `hybrid-sim bench` measures in one run: the wall time of complete loopback sign-ins, the
/// cost of the cryptography one sign-in needs, and how far apart the two are.
public struct BenchmarkReport: Sendable, Hashable, Codable {
    /// Where it ran.
    public var machine: MachineInfo
    /// The sign-ins.
    public var signIn: SignInBenchmark.Result
    /// The crypto floor.
    public var crypto: CryptoFloor
    /// Median sign-in wall time ÷ crypto floor per sign-in.
    public var ratio: Double
    /// 99th-percentile sign-in wall time ÷ crypto floor per sign-in.
    public var p99Ratio: Double
    /// What the sign-in's socket work alone costs with plain system calls (`nil` if not measured).
    public var sockets: SocketFloor?
    /// The event loops the run used (`one` or `all`), so two reports can be told apart.
    public var loops: SignInBenchmark.Loops?
    /// Swift concurrency's global executor in the run (`nio` or `swift`; the command sets it).
    public var executor: String?
    /// When the run started (ISO 8601, UTC).
    public var startedAt: String?
    /// How the figures are given, so the JSON explains itself.
    public var units: String? = "times in milliseconds unless the key names nanoseconds or seconds"

    /// Combines a sign-in run, a crypto measurement and optionally a socket measurement taken on
    /// `machine`.
    public init(
        machine: MachineInfo = .current, signIn: SignInBenchmark.Result, crypto: CryptoFloor, sockets: SocketFloor? = nil
    ) {
        self.machine = machine
        self.signIn = signIn
        self.crypto = crypto
        self.sockets = sockets
        self.ratio = crypto.floorMilliseconds > 0 ? signIn.summary.p50 / crypto.floorMilliseconds : 0
        self.p99Ratio = crypto.floorMilliseconds > 0 ? signIn.summary.p99 / crypto.floorMilliseconds : 0
    }

    /// Runs `benchmark` and, interleaved with its sign-ins, about 20 rounds of crypto timings
    /// (`cryptoIterations` calls of each operation per round), so that the floor and the sign-ins
    /// are measured under the same conditions.
    public static func measure(
        _ benchmark: SignInBenchmark, cryptoIterations: Int = 50, progress: @Sendable (String) -> Void = { _ in }
    ) async throws -> BenchmarkReport {
        let startedAt = Date().formatted(.iso8601)
        progress(
            "registering, \(benchmark.warmup) warm-up sign-in(s), then timing \(benchmark.count) sign-ins "
                + "with rounds of crypto timings between them")
        var sampler = try CryptoFloor.Sampler(iterations: cryptoIterations)
        var sockets = try SocketFloor.Sampler()
        defer { sockets.close() }
        let every = Swift.max(benchmark.count / 20, 1)
        let step = Swift.max(benchmark.count / 10, 1)
        let signIn = try await benchmark.run(
            progress: { done in
                if done % step == 0 || done == benchmark.count { progress("  \(done)/\(benchmark.count) sign-ins") }
            },
            between: { done in
                guard done % every == 0 else { return false }
                try sampler.round()
                try sockets.round()
                return true
            })
        while sampler.rounds < 5 {
            try sampler.round()
            try sockets.round()
        }
        var report = BenchmarkReport(signIn: signIn, crypto: sampler.result, sockets: sockets.result)
        report.loops = benchmark.loops
        report.startedAt = startedAt
        return report
    }

    /// The report as pretty-printed JSON (sorted keys; times in milliseconds unless named nanoseconds).
    public var json: String { Self.prettyJSON(self) }

    /// `value` as pretty-printed JSON with sorted keys (`{}` if it cannot be encoded).
    static func prettyJSON(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        guard let data = try? encoder.encode(value) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }

    /// The report for people.
    public var text: String {
        let s = signIn.summary
        var lines: [String] = []
        lines.append(
            "hybrid-sim bench: \(signIn.count) QR sign-ins (getAssertion) through a loopback relay, real sockets, "
                + "\(signIn.warmup) warm-up, \(machine.buildConfiguration) build")
        lines.append(
            "machine: \(machine.summary)")
        lines.append("")
        lines.append("sign-in wall time, start to verified assertion (ms):")
        lines.append("  " + Self.summaryLine(s))
        lines.append("whole transaction, until both sides closed the tunnel (ms):")
        lines.append("  " + Self.summaryLine(signIn.transaction))
        lines.append("  registration before them: \(Self.fixed(signIn.registrationMilliseconds, 2)) ms")
        lines.append("")
        lines.append("where a sign-in's time goes (median ms of each phase):")
        for phase in signIn.phases {
            lines.append("  \(Self.pad(phase.name, 48)) \(Self.leftPad(Self.fixed(phase.summary.p50, 3), 9))")
        }
        lines.append(
            "  \(Self.pad("(after it: closing handshakes, phone's end)", 48)) "
                + "\(Self.leftPad(Self.fixed(signIn.teardown.p50, 3), 9))")
        lines.append("")
        lines.append(
            "crypto one sign-in needs (swift-crypto; median of \(crypto.rounds) rounds × \(crypto.iterations) calls, "
                + "interleaved with the sign-ins):")
        lines.append("  \(Self.pad("operation", 34)) \(Self.leftPad("count", 5)) \(Self.leftPad("µs each", 10)) \(Self.leftPad("µs/sign-in", 11))")
        for operation in crypto.operations {
            lines.append(
                "  \(Self.pad(operation.kind.label, 34)) \(Self.leftPad("\(operation.perSignIn)", 5)) "
                    + "\(Self.leftPad(Self.fixed(operation.nanoseconds / 1e3, 2), 10)) "
                    + "\(Self.leftPad(Self.fixed(operation.nanosecondsPerSignIn / 1e3, 1), 11))")
        }
        lines.append(
            "  \(Self.pad("crypto floor per sign-in", 34)) \(Self.leftPad("", 5)) \(Self.leftPad("", 10)) "
                + "\(Self.leftPad(Self.fixed(crypto.floorNanoseconds / 1e3, 1), 11))")
        lines.append(
            "  (floor from each operation's fastest round: "
                + "\(Self.fixed(crypto.fastestFloorNanoseconds / 1e3, 1)) µs)")
        lines.append("")
        if let sockets {
            lines.append(
                "sockets one sign-in needs (plain blocking system calls on one thread, no framework; "
                    + "median of \(sockets.count) replicas, interleaved):")
            lines.append(
                "  2 TCP connections with upgrade request and response, 1 UDP advert, 7 messages through "
                    + "the relay, 4 closes: \(Self.fixed(sockets.milliseconds, 3)) ms (fastest \(Self.fixed(sockets.fastestMilliseconds, 3)))")
            let both = crypto.floorMilliseconds + sockets.milliseconds
            lines.append(
                "  crypto floor + sockets: \(Self.fixed(both, 3)) ms; sign-in p50 ÷ that = "
                    + "\(Self.fixed(both > 0 ? s.p50 / both : 0, 1))×")
            lines.append("")
        }
        lines.append(
            "ratio: sign-in p50 \(Self.fixed(s.p50, 2)) ms ÷ crypto floor \(Self.fixed(crypto.floorMilliseconds, 3)) ms "
                + "= \(Self.fixed(ratio, 1))×; p99 \(Self.fixed(s.p99, 2)) ms = \(Self.fixed(p99Ratio, 1))×")
        return lines.joined(separator: "\n")
    }

    private static func summaryLine(_ s: LatencySummary) -> String {
        "p50 \(fixed(s.p50, 2))   p99 \(fixed(s.p99, 2))   mean \(fixed(s.mean, 2))   "
            + "min \(fixed(s.min, 2))   max \(fixed(s.max, 2))   (n = \(s.count))"
    }

    static func fixed(_ value: Double, _ digits: Int) -> String {
        String(format: "%.\(digits)f", value)
    }

    private static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }

    private static func leftPad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
    }
}
