import Foundation
import Testing

/// `TaskLocal.withValue` in a task running on SwiftNIO's event loops as the global executor (how
/// every `hybrid-sim` program runs) crashed the release build in `swift_task_localValuePush` while
/// the debug build, which the tests use, ran it (Docs/ROBUSTNESS.md). No test can see that crash,
/// so the sources are checked for the construct itself.
@Suite("Sources: no task-local values")
struct NoTaskLocalsTests {
    @Test("no @TaskLocal and no .withValue( in Sources/")
    func noTaskLocals() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
        let files = try #require(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
        var found: [String] = []
        var read = 0
        for case let file as URL in files where file.pathExtension == "swift" {
            let text = try String(contentsOf: file, encoding: .utf8)
            read += 1
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where line.contains("@TaskLocal") || line.contains(".withValue(") {
                found.append("\(file.lastPathComponent):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
        #expect(read > 100, "the sources were found (\(read) files)")
        #expect(found.isEmpty, "\(found.joined(separator: "\n"))")
    }
}
