// hybrid-fuzz TARGET [libFuzzer flags and corpus directories…]
//
// With libFuzzer linked (Scripts/fuzz builds it so) this runs libFuzzer's driver on one target and
// traps on an invariant violation, so libFuzzer records it as a crash. Without libFuzzer (the
// normal `swift build`) it replays the files and directories given. `hybrid-fuzz list` names the
// targets; `hybrid-fuzz seeds DIR` writes each target's built-in seeds to DIR/<target>/.
import CHybridFuzz
import Foundation
import HybridFuzz

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("hybrid-fuzz: \(message)\n".utf8))
    exit(2)
}

let arguments = CommandLine.arguments
guard arguments.count >= 2 else {
    fail("usage: hybrid-fuzz list | seeds DIR | TARGET [libFuzzer flags] [corpus directories or files]")
}

switch arguments[1] {
case "list":
    for target in FuzzTargets.all { print("\(target.name)\t\(target.summary)") }
    exit(0)
case "seeds":
    guard arguments.count == 3 else { fail("usage: hybrid-fuzz seeds DIR") }
    var refused: [String] = []
    for target in FuzzTargets.all {
        let directory = arguments[2] + "/" + target.name
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for (index, seed) in target.seeds().enumerated() {
            if case .violation(let message) = target.run(seed) {
                refused.append("seed \(index) of \(target.name): \(message)")
                continue
            }
            guard FileManager.default.createFile(atPath: directory + "/seed-\(index)", contents: Data(seed)) else {
                fail("cannot write seed \(index) of \(target.name) to \(directory)")
            }
        }
    }
    if !refused.isEmpty { fail("seeds breaking an invariant:\n" + refused.joined(separator: "\n")) }
    exit(0)
default:
    break
}

/// The environment variable that carries the target's name to the processes libFuzzer starts
/// itself (`-merge=1`, `-fork=N`): it runs this binary again with its own flags only.
let targetVariable = "HYBRID_FUZZ_TARGET"
let target: FuzzTarget
let rest: ArraySlice<String>
if let named = FuzzTargets.named(arguments[1]) {
    target = named
    rest = arguments.dropFirst(2)
} else if let inherited = ProcessInfo.processInfo.environment[targetVariable], let named = FuzzTargets.named(inherited) {
    target = named
    rest = arguments.dropFirst(1)
} else {
    fail("no target \(arguments[1]); `hybrid-fuzz list` names them")
}
setenv(targetVariable, target.name, 1)

/// The target libFuzzer's C callback runs (a C function pointer cannot capture it).
nonisolated(unsafe) var current = target

let callback: hybrid_fuzz_callback = { data, size in
    let input = size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size))
    if case .violation(let message) = current.run(input) {
        FileHandle.standardError.write(Data("hybrid-fuzz: \(current.name): invariant violated: \(message)\n".utf8))
        FuzzScratch.remove()  // abort() skips the removal at exit
        abort()  // libFuzzer saves the input as crash-…
    }
    return 0
}

if hybrid_fuzz_has_libfuzzer() != 0 {
    // libFuzzer reads argv[0] and its own flags; drop the target name.
    let driverArguments = [arguments[0]] + rest
    var cStrings: [UnsafeMutablePointer<CChar>?] = driverArguments.map { strdup($0) } + [nil]
    var argc = Int32(driverArguments.count)
    let status = cStrings.withUnsafeMutableBufferPointer { buffer -> Int32 in
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = buffer.baseAddress
        return hybrid_fuzz_run_driver(&argc, &argv, callback)
    }
    exit(status)
}

// Replay mode: libFuzzer flags (-name=value) are ignored.
let paths = rest.filter { !$0.hasPrefix("-") }
let results = FuzzReplay.run(target, paths: Array(paths))
var counts = (accepted: 0, rejected: 0, violations: 0)
for result in results {
    switch result.outcome {
    case .accepted: counts.accepted += 1
    case .rejected: counts.rejected += 1
    case .violation(let message):
        counts.violations += 1
        print("VIOLATION \(result.path): \(message)")
    }
}
print("\(target.name): replayed \(results.count) inputs (libFuzzer not linked): \(counts.accepted) accepted, \(counts.rejected) rejected, \(counts.violations) violations")
exit(counts.violations == 0 ? 0 : 1)
