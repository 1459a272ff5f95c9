import Foundation
import Testing

@Suite("Docs/HARNESS.md")
struct HarnessDocTests {
    @Test("the example in the doc is HarnessExampleTests.swift, character for character")
    func exampleMatchesTheTest() throws {
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let root = tests.deletingLastPathComponent().deletingLastPathComponent()
        let doc = try String(contentsOf: root.appendingPathComponent("Docs/HARNESS.md"), encoding: .utf8)
        let example = try String(contentsOf: tests.appendingPathComponent("HarnessExampleTests.swift"), encoding: .utf8)

        // The example is the first ```swift block after the "example test" marker comment.
        let marker = try #require(doc.range(of: "<!-- example test: Tests/HybridRuntimeTests/HarnessExampleTests.swift -->"))
        let rest = doc[marker.upperBound...]
        let open = try #require(rest.range(of: "```swift\n"))
        let close = try #require(rest[open.upperBound...].range(of: "\n```\n"))
        let block = String(rest[open.upperBound..<close.lowerBound]) + "\n"
        #expect(block == example, "Docs/HARNESS.md and HarnessExampleTests.swift differ: update the doc")
    }
}
