import CTAP2
import Foundation
import HybridRuntime
import HybridSim
import Testing

/// `RelayContactFile`: the relay's contact memory on disk (Docs/STORES.md).
@Suite("Relay contact file")
struct RelayContactFileTests {
    @Test("round trip of both lists in order, mode 0600; no file is an empty memory; one holder at a time, the lock given back when the value goes")
    func roundTripAndLock() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("contacts.json")
        #expect(try RelayContactFile.load(path: path) == RelayContactMemory())
        let memory = RelayContactMemory(
            known: [Array(repeating: 1, count: 32), Array(repeating: 2, count: 32)], revoked: [Array(repeating: 3, count: 32)])
        var holder: RelayContactFile? = try RelayContactFile.open(path: path)
        #expect(holder?.memory == RelayContactMemory())
        try holder?.persistence.save(memory)
        #expect(try RelayContactFile.load(path: path) == memory)
        #expect(try TemporaryDirectory.mode(path) == 0o600)
        let second = #expect(throws: StoreError.self) { _ = try RelayContactFile.open(path: path) }
        #expect(second?.code == .locked && second?.reason.contains("another process holds \(path).lock") == true, "\(String(describing: second))")
        holder = nil
        #expect(try RelayContactFile.open(path: path).memory == memory)
        // An empty list, and the text any JSON reader takes.
        let oneSided = RelayContactMemory(known: [], revoked: [Array(repeating: 0xFB, count: 32)])
        try RelayContactFile.save(oneSided, to: path)
        #expect(try RelayContactFile.load(path: path) == oneSided)
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any]
        #expect(object?["version"] as? Int == 1 && (object?["known"] as? [Any])?.isEmpty == true
                && object?["revoked"] as? [String] == ["-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_s"], "\(String(describing: object))")
    }

    @Test("a save after the file's directory was removed (the relay running meanwhile) fails with writeFailed and does not make the directory again")
    func saveDoesNotRecreateTheDirectory() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let gone = directory.file("gone")
        try FileManager.default.createDirectory(atPath: gone, withIntermediateDirectories: false)
        let path = gone + "/contacts.json"
        try FileManager.default.removeItem(atPath: gone)
        let error = #expect(throws: StoreError.self) { try RelayContactFile.save(RelayContactMemory(), to: path) }
        #expect(error?.code == .writeFailed && error?.description == "\(path): cannot write the store: its directory \(gone) does not exist (it is not made again)", "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: gone))
    }

    /// A walkthrough: `"known"` given twice started, and the next save kept one of the lists;
    /// `"version":1.0` was taken for 1.
    @Test("read as strictly as the stores: a member given twice is not JSON, version 1.0 is not 1, an ID of another type is named")
    func strict() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("contacts.json")
        let a = Base64URL.encode(Array(repeating: 1, count: 32))
        let b = Base64URL.encode(Array(repeating: 2, count: 32))
        for (text, code, mention) in [
            (#"{"version":1,"known":["\#(a)"],"known":["\#(b)"],"revoked":[]}"#, StoreError.Code.notJSON, #"duplicate member "known""#),
            (#"{"version":1,"version":1,"known":[]}"#, .notJSON, #"duplicate member "version""#),
            (#"{"version":1.0,"known":["\#(a)"]}"#, .unsupportedVersion, #""version" is not an integer (1.0)"#),
            (#"{"version":1,"known":[7]}"#, .invalidEntry, "known[0]: wrong type: a string is required"),
        ] {
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            let error = #expect(throws: StoreError.self) { _ = try RelayContactFile.load(path: path) }
            #expect(error?.code == code && error?.reason.contains(mention) == true, "\(text): \(String(describing: error))")
        }
        try Data(#"{"version":1,"known":["\#(a)"],"revoked":null,"later":{"x":1}}"#.utf8).write(to: URL(fileURLWithPath: path))
        #expect(try RelayContactFile.load(path: path) == RelayContactMemory(known: [Array(repeating: 1, count: 32)], revoked: []))
    }
}
