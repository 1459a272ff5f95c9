import Foundation
import HybridFuzz
import Testing

/// Replays the committed fuzz corpora (`Tests/Fuzz/Corpus/<target>/`) and every regression input
/// (`Tests/Fuzz/Regressions/<target>/`, one file per crash libFuzzer found, fixed since) through
/// the same target functions `hybrid-fuzz` runs, in-process: this is CI's fuzz smoke when no
/// sanitizer build is made (`Docs/ROBUSTNESS.md`).
@Suite("Fuzz corpora", .timeLimit(.minutes(2)))
struct FuzzCorpusTests {
    static let fuzzDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz").path

    static func directory(_ kind: String, _ target: FuzzTarget) -> String {
        fuzzDirectory + "/\(kind)/\(target.name)"
    }

    @Test("every target has a committed corpus that replays without a violation", arguments: FuzzTargets.all.map(\.name))
    func corpus(_ name: String) throws {
        let target = try #require(FuzzTargets.named(name))
        let results = FuzzReplay.run(target, paths: [Self.directory("Corpus", target)])
        #expect(results.count >= target.seeds().count, "\(name): corpus has \(results.count) files")
        let violations = results.filter { if case .violation = $0.outcome { true } else { false } }
        #expect(violations.isEmpty, "\(name): \(violations.prefix(3).map { "\($0.path): \($0.outcome)" })")
        #expect(results.contains { $0.outcome == .accepted }, "\(name): nothing in the corpus is accepted")
    }

    @Test("every regression input (a crash found by fuzzing) is now handled", arguments: FuzzTargets.all.map(\.name))
    func regressions(_ name: String) throws {
        let target = try #require(FuzzTargets.named(name))
        for result in FuzzReplay.run(target, paths: [Self.directory("Regressions", target)]) {
            if case .violation(let message) = result.outcome { Issue.record("\(result.path): \(message)") }
        }
    }

    @Test("each target accepts one of its built-in seeds, and no seed or mutilated seed is a violation", arguments: FuzzTargets.all.map(\.name))
    func seeds(_ name: String) throws {
        let target = try #require(FuzzTargets.named(name))
        let seeds = target.seeds()
        #expect(!seeds.isEmpty)
        #expect(seeds.contains { target.run($0) == .accepted }, "\(name): no seed is accepted")
        for seed in seeds {
            if case .violation(let message) = target.run(seed) { Issue.record("\(name): \(message)") }
            for mutated in [Array(seed.dropLast()), Array(seed.dropFirst()), seed + [0], seed.map { $0 ^ 0x01 }] {
                if case .violation(let message) = target.run(mutated) { Issue.record("\(name): \(message)") }
            }
        }
    }

    @Test("target names are unique and each has a corpus directory")
    func names() {
        let names = FuzzTargets.all.map(\.name)
        #expect(Set(names).count == names.count)
        #expect(names.count >= 20)
        for target in FuzzTargets.all {
            #expect(FuzzReplay.files(at: Self.directory("Corpus", target)).count > 0, "\(target.name)")
        }
    }
}

/// `FuzzScratch`: the directory the file targets write their stores (private keys among them) into.
@Suite("Fuzz scratch directory")
struct FuzzScratchTests {
    @Test("a new directory of mode 0700 with a name nobody could make in advance, not $TMPDIR/hybrid-fuzz-<pid>")
    func unpredictable() throws {
        let path = FuzzScratch.directory
        #expect(path != NSTemporaryDirectory() + "hybrid-fuzz-\(getpid())", "a name another user could make first")
        #expect(URL(fileURLWithPath: path).lastPathComponent.hasPrefix("hybrid-fuzz-"))
        var info = stat()
        try #require(stat(path, &info) == 0, "\(path): \(String(cString: strerror(errno)))")
        #expect(info.st_mode & S_IFMT == S_IFDIR)
        #expect(info.st_mode & 0o777 == 0o700, "mode \(String(info.st_mode & 0o777, radix: 8))")
        #expect(info.st_uid == geteuid())
    }
}
