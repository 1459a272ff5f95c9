import Foundation
import HybridSim
import HybridTestSupport
import Testing

/// The programs under an address-space limit (`ulimit -v`): below the floor one error line, exit 1,
/// not a trap in the runtime; above it the demo runs, its children included (before the allocator
/// was fitted, glibc's per-thread arenas reserved about 1 GB and the demo could not start its phone
/// even under 600 MB: `Cannot allocate memory`).
@Suite("End to end: the address-space limit", .serialized)
struct EndToEndAddressSpaceLimitTests {
    static let prlimit = "/usr/bin/prlimit"
    static let available = FileManager.default.isExecutableFile(atPath: prlimit)

    /// `hybrid-sim <arguments>` under a hard address-space limit of `kibibytes` KiB.
    private static func start(_ lab: EndToEndLab, kibibytes: Int, _ arguments: [String]) throws -> ChildProcess {
        let bytes = kibibytes << 10
        return try lab.startOther(
            "\(arguments[0]) under ulimit -v \(kibibytes)", [prlimit, "--as=\(bytes):\(bytes)", try HybridSimBinary.url().path] + arguments)
    }

    @Test("any command under ulimit -v 200000 (below the 262144 KiB it needs): one error line, exit 1, no trap", .enabled(if: available))
    func belowTheFloor() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        for arguments in [["qr", "show", "x", "--raw"], ["relay", "--port", "0"]] {
            let process = try Self.start(lab, kibibytes: 200_000, arguments)
            #expect(try await process.waitForExit() == 1, "\(process.transcript)")
            #expect(
                FailureOutput.singleErrorLine(process)
                    == "error: the address-space limit (ulimit -v) is 200000 KiB; hybrid-sim needs at least 262144 KiB to start: "
                    + "raise the limit (ulimit -v 262144, or unlimited)",
                "\(process.transcript)")
        }
    }

    @Test("the demo under ulimit -v 524288: registers and signs in twice, its desktop and phone started (each fits its allocator)",
          .enabled(if: available), .timeLimit(.minutes(2)))
    func demoUnderALimit() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let process = try Self.start(lab, kibibytes: 524_288, ["demo"])
        #expect(try await process.waitForExit(timeout: .seconds(100)) == 0, "\(process.transcript)")
        #expect(!process.standardError.text.contains("Cannot allocate memory"), "\(process.transcript)")
        #expect(!process.standardError.text.contains("Fatal error"), "\(process.transcript)")
    }
}
