import Foundation
import HybridCore
@testable import HybridSim
import Testing

/// ``StoreJSON/bytes(_:)``, the stores' writer: the bytes `JSONSerialization` wrote before it, for
/// what the stores hold, and the two documented differences.
@Suite("Store JSON writer")
struct StoreJSONWriterTests {
    /// What `JSONSerialization` wrote for `object` until 2026-11-28.
    private static func serialized(_ object: Any) throws -> [UInt8] {
        Array(try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]))
            + [UInt8(ascii: "\n")]
    }

    @Test("a saved relying-party store (with unknown members of every JSON kind) is written byte for byte as JSONSerialization wrote it")
    func sameBytesAsBefore() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("rp-credentials.json")
        try RelyingPartyStore(path: path, credentials: try StoreSamples.credentials(count: 4)).save()
        var document = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        document["futureMember"] = [
            "flag": true, "off": false, "count": 0, "negative": -12, "large": UInt64.max, "fraction": 1.5, "nothing": NSNull(),
            "text": "a/b \"quoted\" \\ \u{1}\n\té 😀", "list": [1, "x", [[:] as [String: Any]], ["z": [Any]()]] as [Any],
        ] as [String: Any]
        let written = try StoreJSON.bytes(document)
        #expect(written == (try Self.serialized(document)), "\(String(decoding: written, as: UTF8.self))")
        // And it reads back the same.
        let reread = try #require(try JSONSerialization.jsonObject(with: Data(written)) as? [String: Any])
        #expect(NSDictionary(dictionary: reread).isEqual(to: document))
    }

    @Test("keys sort in byte order (JSONSerialization: case-insensitively, digits as numbers); a fraction is the double's shortest text")
    func documentedDifferences() throws {
        let keys = try StoreJSON.bytes(["alpha": 1, "Zeta": 2, "_x": 3, "a10": 4, "a9": 5])
        let order = String(decoding: keys, as: UTF8.self).split(separator: "\n").dropFirst().dropLast().map { $0.split(separator: "\"")[1] }
        #expect(order == ["Zeta", "_x", "a10", "a9", "alpha"])
        let number = try #require(try JSONSerialization.jsonObject(with: Data(#"{"r": 123456789.123456789}"#.utf8)) as? [String: Any])
        #expect(String(decoding: try StoreJSON.bytes(number), as: UTF8.self) == "{\n  \"r\" : 123456789.12345679\n}\n")
    }

    @Test("a value that is not JSON is an error, not a crash")
    func notJSON() {
        #expect(throws: EncodingError.self) { try StoreJSON.bytes(["date": Date()]) }
    }
}
