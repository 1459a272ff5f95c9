import Foundation
import HybridTestSupport
import Testing

/// The published `Vectors/` files keep the shape Docs/VECTORS.md promises: a description and a
/// provenance per file, a name and a source per vector, names unique within a file (a report that
/// names a failing vector must point at one), and the totals the document states.
@Suite struct VectorFilesTests {
    static var files: [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: Vectors.directory.path)) ?? []
        return names.filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }.sorted()
    }

    @Test("every vector file has a description and a provenance; every vector a name and a source; names are unique within a file")
    func shape() throws {
        #expect(Self.files.count >= 12, "\(Self.files)")
        for file in Self.files {
            let object = try #require(try JSONSerialization.jsonObject(with: Vectors.data(file)) as? [String: Any], "\(file)")
            #expect((object["description"] as? String)?.isEmpty == false, "\(file): description")
            #expect((object["provenance"] as? String)?.isEmpty == false, "\(file): provenance")
            let vectors = try #require(object["vectors"] as? [[String: Any]], "\(file): vectors")
            let names = vectors.map { $0["name"] as? String ?? "" }
            #expect(!names.contains(""), "\(file): a vector without a name")
            #expect(vectors.allSatisfy { ($0["source"] as? String)?.isEmpty == false }, "\(file): a vector without a source")
            let repeated = Dictionary(grouping: names, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
            #expect(repeated.isEmpty, "\(file): names used twice: \(repeated)")
        }
    }

    @Test("Docs/VECTORS.md states the totals the files hold")
    func documentedTotals() throws {
        var total = 0, negative = 0
        for file in Self.files {
            let object = try #require(try JSONSerialization.jsonObject(with: Vectors.data(file)) as? [String: Any])
            let vectors = object["vectors"] as? [[String: Any]] ?? []
            total += vectors.count
            negative += vectors.filter { $0["expectError"] != nil }.count
        }
        let document = try String(
            contentsOf: Vectors.directory.deletingLastPathComponent().appendingPathComponent("Docs/VECTORS.md"), encoding: .utf8)
        #expect(document.contains("\(total) vectors in all, \(negative) of them negative."), "the files hold \(total), \(negative) negative")
    }
}
