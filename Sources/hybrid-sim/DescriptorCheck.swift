import ArgumentParser
import HybridSim

/// The open-file limit a command that opens sockets starts with: checked first, before anything
/// touches SwiftNIO's singletons, whose event loops cannot be created under a tiny limit (NIO traps
/// then, a crash with a backtrace, exit 132) and whose sockets would fail one by one.
enum DescriptorCheck {
    /// The open-file limit below which `hybrid-sim` does not start at all (``HybridSimCommand/main()``):
    /// the three standard descriptors, the signal pipe, and Dispatch's and SwiftNIO's event sources
    /// take about a dozen before any connection (at 6 and 7 a program trapped, exit 132).
    static let startFloor = 16

    /// Raises the open-file limit to the hard one (``DescriptorLimit/raiseToHard()``) and, when what
    /// it holds beside the process's own descriptors (``DescriptorLimit/connectionsFitting(_:eventLoops:)``)
    /// is fewer than `needed` connections, fails with one `error:` line (and, with `json`, an `error`
    /// event), exit 1, saying so: `holder` names the program ("relay"), `need` what it needs ("a
    /// tunnel needs 2"), `advice` what `ulimit -n 1024` gives. Returns the limit now in force,
    /// `nil` if unknown.
    @discardableResult
    static func require(
        _ needed: Int, holder: String, need: String, advice: String? = nil, json: Bool = false
    ) throws -> Int? {
        guard let limit = DescriptorLimit.raiseToHard() else { return nil }
        let fits = DescriptorLimit.connectionsFitting(limit)
        guard fits < needed else { return limit }
        let holds = advice ?? "ulimit -n 1024 holds \(DescriptorLimit.connectionsFitting(1024)) connections"
        throw failureLine(
            "the open-file limit (ulimit -n) is \(limit), which leaves room for \(fits) connection(s) beside what the \(holder) itself holds, "
                + "and \(need): raise the limit (\(holds))",
            kind: ProgramFailure.Kind.failed.rawValue, status: 1, json: json)
    }

    /// ``require(_:holder:need:advice:json:)`` for a program that runs or joins a ceremony (`desktop`,
    /// `phone`, `demo`, `bench`): a tunnel's two connections.
    static func requireTunnel(holder: String, json: Bool = false) throws {
        try require(2, holder: holder, need: "a tunnel needs 2", json: json)
    }
}
