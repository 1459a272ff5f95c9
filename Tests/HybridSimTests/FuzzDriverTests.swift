import Foundation
import Testing

/// `hybrid-fuzz` as libFuzzer's merge and fork modes run it: again, with libFuzzer's own flags only,
/// the target's name in `HYBRID_FUZZ_TARGET` (`Scripts/fuzz merge`). The debug build has no libFuzzer
/// linked, so it replays the inputs it is given, which shows the target it picked.
@Suite("hybrid-fuzz: the target name for libFuzzer's child processes")
struct FuzzDriverTests {
    private static func run(_ arguments: [String], environment: [String: String]) throws -> (Int32, String) {
        let binary = try HybridSimBinary.url().deletingLastPathComponent().appendingPathComponent("hybrid-fuzz")
        let run = try ChildProcess.run(
            binary.path, arguments,
            environment: ProcessInfo.processInfo.environment.filter { $0.key != "HYBRID_FUZZ_TARGET" }.merging(environment) { $1 })
        return (run.status, run.output + run.error)
    }

    private static let corpora = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz/Corpus").path
    private static let corpus = corpora + "/tunnel-path"

    @Test("without a target argument it runs the target HYBRID_FUZZ_TARGET names")
    func inheritedTarget() throws {
        let (status, output) = try Self.run(["-runs=0", Self.corpus], environment: ["HYBRID_FUZZ_TARGET": "tunnel-path"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("tunnel-path: replayed"), "\(output)")
        #expect(output.contains(" 0 violations"), "\(output)")
    }

    @Test("a target argument wins over the environment; neither, or an unknown name, is refused with exit 2")
    func named() throws {
        let (status, output) = try Self.run(["digits", "-runs=0"], environment: ["HYBRID_FUZZ_TARGET": "tunnel-path"])
        #expect(status == 0 && output.contains("digits: replayed 0 inputs"), "\(output)")
        let (refused, message) = try Self.run(["-runs=0", Self.corpus], environment: [:])
        #expect(refused == 2 && message.contains("no target -runs=0"), "\(message)")
        let (unknown, why) = try Self.run(["-runs=0"], environment: ["HYBRID_FUZZ_TARGET": "no-such-target"])
        #expect(unknown == 2 && why.contains("no target"), "\(why)")
    }

    @Test("replaying the corpora of the targets that use files, and writing the seeds, leave nothing in TMPDIR")
    func scratchRemoved() throws {
        let temporary = NSTemporaryDirectory() + "fuzz-driver-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: temporary) }
        let seeds = temporary + "-seeds"
        defer { try? FileManager.default.removeItem(atPath: seeds) }
        let targets = ["passkey-store", "rp-store", "relay-contact-file", "link-store", "phone-link-store", "rp-request", "rp-result"]
        for arguments in targets.map({ [$0, Self.corpora + "/" + $0] }) + [["seeds", seeds]] {
            let (status, output) = try Self.run(arguments, environment: ["TMPDIR": temporary])
            #expect(status == 0 && !output.contains("VIOLATION"), "\(arguments[0]): \(output)")
            let left = try FileManager.default.contentsOfDirectory(atPath: temporary)
            #expect(left.isEmpty, "hybrid-fuzz \(arguments[0]) left \(left) in its TMPDIR")
        }
    }
}
