import Foundation
import HybridSim
import Testing

/// One way a store file can be damaged, with the error it must produce and a word the message must
/// contain. `make` receives the entries key and valid entries (as JSON objects) and returns the bytes.
struct CorruptStore: Sendable, CustomTestStringConvertible {
    let name: String
    let expected: StoreError
    let mention: String
    let make: @Sendable (_ key: String, _ entries: [[String: Any]]) -> [UInt8]

    var testDescription: String { name }

    /// The damaged bytes, from valid entries encoded as a JSON array.
    func bytes(_ entriesJSON: String, key: String = "passkeys") -> [UInt8] {
        let entries = (try? JSONSerialization.jsonObject(with: Data(entriesJSON.utf8))) as? [[String: Any]] ?? []
        return make(key, entries)
    }

    static func json(_ object: Any) -> [UInt8] {
        Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data())
    }

    /// `entries` with entry `index` edited.
    static func editing(
        _ entries: [[String: Any]], _ index: Int, _ edit: (inout [String: Any]) -> Void
    ) -> [[String: Any]] {
        var out = entries
        edit(&out[index])
        return out
    }

    /// Damage any store file can have.
    static let documentCases: [CorruptStore] = [
        CorruptStore(name: "empty file", expected: StoreError(.notJSON), mention: "end of file") { _, _ in [] },
        CorruptStore(name: "truncated mid-write", expected: StoreError(.notJSON), mention: "not JSON") { key, entries in
            let whole = json(["version": 1, key: entries])
            return Array(whole.prefix(whole.count / 2))
        },
        CorruptStore(name: "binary garbage", expected: StoreError(.notJSON), mention: "character 0") { _, _ in
            [0xFF, 0x00, 0x13, 0x37]
        },
        CorruptStore(name: "top level is an array", expected: StoreError(.invalidDocument), mention: "object") { _, entries in
            json(entries)
        },
        CorruptStore(name: "no version", expected: StoreError(.unsupportedVersion), mention: "version") { key, entries in
            json([key: entries])
        },
        CorruptStore(name: "version 2", expected: StoreError(.unsupportedVersion), mention: "version 2") { key, entries in
            json(["version": 2, key: entries])
        },
        CorruptStore(name: "version is a string", expected: StoreError(.unsupportedVersion), mention: "integer") { key, entries in
            json(["version": "1", key: entries])
        },
        // Both accepted by JSONSerialization and JSONDecoder before the strict reader ran first.
        CorruptStore(name: "version 1.0", expected: StoreError(.unsupportedVersion), mention: "not an integer (1.0)") { key, entries in
            let whole = String(decoding: json(["version": 1, key: entries]), as: UTF8.self)
            return Array(whole.replacingOccurrences(of: "\"version\":1", with: "\"version\":1.0").utf8)
        },
        // Foundation quotes a number it cannot hold whole: the message shows its start and length.
        CorruptStore(name: "version 400 digits long", expected: StoreError(.notJSON), mention: "1111111111111111…, 402 characters") {
            key, entries in
            let whole = String(decoding: json(["version": 1, key: entries]), as: UTF8.self)
            return Array(whole.replacingOccurrences(of: "\"version\":1", with: "\"version\":" + String(repeating: "1", count: 400) + ".5").utf8)
        },
        // A walkthrough: "is not an integer" for an integer too large, and "unexpected character 0xef" for a BOM.
        CorruptStore(name: "version 20 digits long", expected: StoreError(.unsupportedVersion), mention: "\"version\" 99999999999999999999 is out of range") {
            key, entries in
            let whole = String(decoding: json(["version": 1, key: entries]), as: UTF8.self)
            return Array(whole.replacingOccurrences(of: "\"version\":1", with: "\"version\":99999999999999999999").utf8)
        },
        CorruptStore(name: "a UTF-8 byte-order mark", expected: StoreError(.notJSON), mention: "it begins with a UTF-8 byte-order mark (EF BB BF), which a store must not have: remove those 3 bytes") {
            key, entries in
            [0xEF, 0xBB, 0xBF] + json(["version": 1, key: entries])
        },
        CorruptStore(name: "version given twice", expected: StoreError(.notJSON), mention: "duplicate member \"version\"") { key, entries in
            let whole = String(decoding: json(["version": 1, key: entries]), as: UTF8.self)
            return Array(whole.replacingOccurrences(of: "\"version\":1", with: "\"version\":1,\"version\":1").utf8)
        },
        CorruptStore(name: "no entries array", expected: StoreError(.invalidDocument), mention: "array") { _, _ in
            json(["version": 1])
        },
        CorruptStore(name: "entries is an object", expected: StoreError(.invalidDocument), mention: "not an array") { key, _ in
            json(["version": 1, key: [String: Any]()])
        },
        CorruptStore(name: "an entry is a string", expected: StoreError(.invalidEntry), mention: "[1]") { key, entries in
            json(["version": 1, key: [entries[0], "x"]])
        },
        CorruptStore(name: "credentialId not base64url", expected: StoreError(.invalidEntry), mention: "[0].credentialId") {
            key, entries in
            json(["version": 1, key: editing(entries, 0) { $0["credentialId"] = "a+b/" }])
        },
        CorruptStore(name: "rpId missing", expected: StoreError(.invalidEntry), mention: "[1].rpId") { key, entries in
            json(["version": 1, key: editing(entries, 1) { $0["rpId"] = nil }])
        },
        CorruptStore(name: "signCount negative", expected: StoreError(.invalidEntry), mention: "[1]") { key, entries in
            json(["version": 1, key: editing(entries, 1) { $0["signCount"] = -1 }])
        },
        CorruptStore(name: "signCount is text", expected: StoreError(.invalidEntry), mention: "[0].signCount: wrong type: a whole number is required") {
            key, entries in
            json(["version": 1, key: editing(entries, 0) { $0["signCount"] = "3" }])
        },
        CorruptStore(name: "rpId is null", expected: StoreError(.invalidEntry), mention: "[1].rpId: null, where a string is required") {
            key, entries in
            json(["version": 1, key: editing(entries, 1) { $0["rpId"] = NSNull() }])
        },
        CorruptStore(name: "rpId is a number", expected: StoreError(.invalidEntry), mention: "[0].rpId: wrong type: a string is required") {
            key, entries in
            json(["version": 1, key: editing(entries, 0) { $0["rpId"] = 7 }])
        },
        CorruptStore(name: "version is null", expected: StoreError(.unsupportedVersion), mention: "integer") { key, entries in
            json(["version": NSNull(), key: entries])
        },
        CorruptStore(name: "duplicate credential", expected: StoreError(.invalidEntry), mention: "duplicate credentialId") {
            key, entries in
            json(["version": 1, key: [entries[0], entries[1], entries[0]]])
        },
    ]

    /// Damage specific to the passkey store.
    static let passkeyCases: [CorruptStore] =
        documentCases + [
            CorruptStore(name: "private key too short", expected: StoreError(.invalidEntry), mention: "[1].privateKey") {
                key, entries in
                json(["version": 1, key: editing(entries, 1) { $0["privateKey"] = "AAAA" }])
            }
        ]

    /// Damage specific to the relying-party store.
    static let credentialCases: [CorruptStore] =
        documentCases + [
            CorruptStore(name: "public key not a COSE_Key", expected: StoreError(.invalidEntry), mention: "[0].publicKey") {
                key, entries in
                json(["version": 1, key: editing(entries, 0) { $0["publicKey"] = "oA" }])
            },
            CorruptStore(name: "empty credential ID", expected: StoreError(.invalidEntry), mention: "[1].credentialId") {
                key, entries in
                json(["version": 1, key: editing(entries, 1) { $0["credentialId"] = "" }])
            },
            CorruptStore(name: "backupEligible missing", expected: StoreError(.invalidEntry), mention: "backupEligible") {
                key, entries in
                json(["version": 1, key: editing(entries, 0) { $0["backupEligible"] = nil }])
            },
            // Was "The given data was not valid JSON." for a file that is valid JSON.
            CorruptStore(
                name: "signCount beyond 32 bits", expected: StoreError(.invalidEntry),
                mention: "[0].signCount: signCount must be a whole number from 0 to 4294967295"
            ) { key, entries in
                json(["version": 1, key: editing(entries, 0) { $0["signCount"] = 1 << 40 }])
            },
        ]
}
