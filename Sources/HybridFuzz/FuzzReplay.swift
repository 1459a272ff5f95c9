import Foundation

/// Runs stored inputs (corpus and regression files) through a target without libFuzzer.
package enum FuzzReplay {
    /// One file's result.
    package struct Result: Sendable {
        package var path: String
        package var outcome: FuzzOutcome
    }

    /// The regular files at `path` (itself, or the files directly inside it), sorted; hidden files skipped.
    package static func files(at path: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return [] }
        guard isDirectory.boolValue else { return [path] }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().map { path + "/" + $0 }
    }

    /// Every file at each of `paths` through `target`.
    package static func run(_ target: FuzzTarget, paths: [String]) -> [Result] {
        paths.flatMap(files(at:)).map { file in
            let bytes = Array(FileManager.default.contents(atPath: file) ?? Data())
            return Result(path: file, outcome: target.run(bytes))
        }
    }
}
