import CTAP2
import Foundation
import HybridCore
import HybridSim
import Testing

@Suite("Passkey store (phone)")
struct PasskeyStoreTests {
    @Test("a missing file is an empty store, and loading creates nothing")
    func missingFile() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("nested/passkeys.json")
        let store = try PasskeyStore.load(path: path)
        #expect(store.passkeys.isEmpty)
        #expect(store.path == path)
        #expect(!FileManager.default.fileExists(atPath: directory.file("nested")))
    }

    @Test("save then load round-trips; the file is 0600 and a new directory 0700")
    func roundTrip() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("home/.hybrid-sim/passkeys.json")
        var store = PasskeyStore(path: path, passkeys: try StoreSamples.passkeys(count: 3))
        store.passkeys[1].signCount = 41
        try store.save()

        #expect(try TemporaryDirectory.mode(path) == 0o600)
        #expect(try TemporaryDirectory.mode(directory.file("home/.hybrid-sim")) == 0o700)
        let loaded = try PasskeyStore.load(path: path)
        #expect(loaded.passkeys == store.passkeys)
        #expect(loaded.passkey(credentialId: store.passkeys[1].credentialID)?.signCount == 41)
        #expect(loaded.passkeys(rpId: CeremonyFixture.rpId).count == 3)

        // The documented shape: version 1, a "passkeys" array of base64url entries, trailing newline.
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.hasPrefix("{\n  \"passkeys\" : [\n"))
        #expect(text.hasSuffix("\"version\" : 1\n}\n"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let first = try #require((object["passkeys"] as? [[String: Any]])?.first)
        #expect(
            Set(first.keys) == [
                "credentialId", "rpId", "rpName", "userId", "userName", "userDisplayName", "privateKey", "signCount",
                "createdAt",
            ])
    }

    @Test("saving replaces a looser file with a 0600 one and leaves no temporary file")
    func replacesMode() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("passkeys.json")
        _ = FileManager.default.createFile(
            atPath: path, contents: Data(#"{"version":1,"passkeys":[]}"#.utf8), attributes: [.posixPermissions: 0o644])
        var store = try PasskeyStore.load(path: path)
        store.upsert(try StoreSamples.passkeys(count: 1)[0])
        try store.save()
        #expect(try TemporaryDirectory.mode(path) == 0o600)
        // The sidecar lock file stays (it holds no data); no temporary file is left.
        #expect(try directory.contents() == ["passkeys.json", "passkeys.json.lock"])
        #expect(try TemporaryDirectory.mode(directory.file("passkeys.json.lock")) == 0o600)
        #expect(try PasskeyStore.load(path: path).passkeys.count == 1)
    }

    @Test("upsert replaces by credential ID; duplicates are refused before anything is written")
    func upsertAndDuplicates() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let samples = try StoreSamples.passkeys(count: 2)
        var store = PasskeyStore(path: directory.file("passkeys.json"))
        store.upsert(samples[0])
        store.upsert(samples[1])
        var updated = samples[0]
        updated.signCount = 7
        store.upsert(updated)
        #expect(store.passkeys.map(\.signCount) == [7, 0])

        store.passkeys.append(samples[1])
        #expect(throws: StoreError(.invalidEntry)) { try store.save() }
        #expect(try directory.contents().isEmpty)
    }

    @Test(
        "a corrupted file gives a specific error naming the file, and is left byte for byte",
        arguments: CorruptStore.passkeyCases)
    func corrupted(_ corrupt: CorruptStore) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("passkeys.json")
        let good = try JSONEncoder().encode(try StoreSamples.passkeys(count: 2))
        let bytes = corrupt.bytes(String(decoding: good, as: UTF8.self))
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: path)
        let before = try FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date

        do {
            _ = try PasskeyStore.load(path: path)
            Issue.record("\(corrupt.name): loaded")
        } catch {
            #expect(error == corrupt.expected, "\(corrupt.name): \(error)")
            #expect(error.description.hasPrefix(path + ": "), "\(error.description)")
            #expect(error.description.contains(corrupt.mention), "\(corrupt.name): \(error.description)")
            #expect(!error.description.contains("\n"))
            #expect(!error.description.contains("not JSON: not JSON"), "the summary said twice: \(error.description)")
        }
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: path))) == bytes)
        #expect(try TemporaryDirectory.mode(path) == 0o640)
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date == before)
        #expect(try directory.contents() == ["passkeys.json"])
    }

    @Test("a directory where the file should be is unreadable")
    func notAFile() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try FileManager.default.createDirectory(
            atPath: directory.file("passkeys.json"), withIntermediateDirectories: false)
        #expect(throws: StoreError(.unreadable)) { try PasskeyStore.load(path: directory.file("passkeys.json")) }
        // A regular file where a directory should be.
        try Data("x".utf8).write(to: URL(fileURLWithPath: directory.file("plain")))
        #expect(throws: StoreError(.unreadable)) { try PasskeyStore.load(path: directory.file("plain/passkeys.json")) }
        #expect(throws: StoreError(.directoryFailed)) {
            try PasskeyStore(path: directory.file("plain/passkeys.json")).save()
        }
    }

    @Test("a crash mid-save leaves the previous store intact", arguments: SimulatedCrash.allCases)
    func crash(_ point: SimulatedCrash) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("passkeys.json")
        let samples = try StoreSamples.passkeys(count: 4)
        try PasskeyStore(path: path, passkeys: Array(samples.prefix(2))).save()
        let before = try Data(contentsOf: URL(fileURLWithPath: path))

        let bigger = PasskeyStore(path: path, passkeys: samples)
        #expect(throws: StoreError(.writeFailed)) { try bigger.save(simulatingCrash: point) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        #expect(try PasskeyStore.load(path: path).passkeys == Array(samples.prefix(2)))
        let leftovers = try directory.contents().filter { $0.hasPrefix(".passkeys.json.tmp-") }
        #expect(leftovers.count == 1)
        #expect(try TemporaryDirectory.mode(directory.file(leftovers[0])) == 0o600)

        // The next save works; a fresh leftover stays, a stale one is cleaned up.
        try bigger.save()
        #expect(try PasskeyStore.load(path: path).passkeys == samples)
        #expect(try directory.contents().count == 3)  // the store, its lock file and the fresh leftover
        let old = Date(timeIntervalSinceNow: -3600)
        try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: directory.file(leftovers[0]))
        try bigger.save()
        #expect(try directory.contents() == ["passkeys.json", "passkeys.json.lock"])
    }

    @Test("a stray temporary file full of garbage does not affect loading")
    func strayTemporaryFile() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("passkeys.json")
        let samples = try StoreSamples.passkeys(count: 1)
        try PasskeyStore(path: path, passkeys: samples).save()
        try Data("{\"version\": 1, \"passk".utf8).write(
            to: URL(fileURLWithPath: directory.file(".passkeys.json.tmp-1-dead")))
        #expect(try PasskeyStore.load(path: path).passkeys == samples)
    }

    @Test("default location: $HYBRID_SIM_HOME, else ~/.hybrid-sim")
    func defaultPath() {
        #expect(
            PasskeyStore.defaultPath(environment: ["HYBRID_SIM_HOME": "/tmp/hs", "HOME": "/home/a"])
                == "/tmp/hs/passkeys.json")
        #expect(
            PasskeyStore.defaultPath(environment: ["HYBRID_SIM_HOME": "", "HOME": "/home/a"])
                == "/home/a/.hybrid-sim/passkeys.json")
        #expect(
            RelyingPartyStore.defaultPath(environment: ["HOME": "/home/b"]) == "/home/b/.hybrid-sim/rp-credentials.json"
        )
        #expect(PasskeyStore.defaultPath().hasSuffix("/passkeys.json"))
    }
}

/// A passkey whose JSON is well-formed but which the phone could not use, and the one line that
/// must report it (after `<path>: invalid entry: `).
struct UnusablePasskey: Sendable, CustomTestStringConvertible {
    let name: String
    /// The member of `passkeys[1]` to replace, and its new value as JSON text.
    let member: String
    let valueJSON: String
    let reason: String

    var testDescription: String { name }

    /// The P-256 group order n (SEC 2, section 2.4.2): a private scalar must be in 1…n−1.
    static let curveOrder: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]

    static func key(_ bytes: [UInt8]) -> String { "\"" + Base64URL.encode(bytes) + "\"" }

    static let cases: [UnusablePasskey] = [
        UnusablePasskey(
            name: "private key 0", member: "privateKey", valueJSON: key(Array(repeating: 0, count: 32)),
            reason: "passkeys[1].privateKey: not a P-256 private key"),
        UnusablePasskey(
            name: "private key 0xFF…FF (above the curve order)", member: "privateKey",
            valueJSON: key(Array(repeating: 0xFF, count: 32)),
            reason: "passkeys[1].privateKey: not a P-256 private key"),
        UnusablePasskey(
            name: "private key equal to the curve order", member: "privateKey", valueJSON: key(curveOrder),
            reason: "passkeys[1].privateKey: not a P-256 private key"),
        UnusablePasskey(
            name: "empty credentialId", member: "credentialId", valueJSON: "\"\"",
            reason: "passkeys[1].credentialId: credential ID must be 1…1023 bytes, found 0"),
        UnusablePasskey(
            name: "credentialId of 1024 bytes", member: "credentialId", valueJSON: key(Array(repeating: 7, count: 1024)),
            reason: "passkeys[1].credentialId: credential ID must be 1…1023 bytes, found 1024"),
        UnusablePasskey(
            name: "empty rpId", member: "rpId", valueJSON: "\"\"",
            reason: "passkeys[1].rpId: relying party ID is empty"),
        UnusablePasskey(
            name: "negative signCount", member: "signCount", valueJSON: "-1",
            reason: "passkeys[1].signCount: signCount must be a whole number from 0 to 4294967295"),
        UnusablePasskey(
            name: "signCount above 2^32 − 1", member: "signCount", valueJSON: "4294967296",
            reason: "passkeys[1].signCount: signCount must be a whole number from 0 to 4294967295"),
        UnusablePasskey(
            name: "signCount not a whole number", member: "signCount", valueJSON: "7.5",
            reason: "passkeys[1].signCount: signCount must be a whole number from 0 to 4294967295"),
    ]

    /// A store file of two good passkeys with `passkeys[1].<member>` replaced.
    func bytes() throws -> [UInt8] {
        let good = try JSONEncoder().encode(try StoreSamples.passkeys(count: 2))
        var entries = try #require(try JSONSerialization.jsonObject(with: good) as? [[String: Any]])
        entries[1][member] = try JSONSerialization.jsonObject(with: Data(valueJSON.utf8), options: [.fragmentsAllowed])
        let document: [String: Any] = ["version": 1, "passkeys": entries]
        return Array(try JSONSerialization.data(withJSONObject: document, options: [.sortedKeys]))
    }
}

extension PasskeyStoreTests {
    @Test(
        "a passkey the phone could not use is refused naming the file and the entry; the file is left byte for byte",
        arguments: UnusablePasskey.cases)
    func unusablePasskey(_ unusable: UnusablePasskey) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("passkeys.json")
        let bytes = try unusable.bytes()
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let before = try FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date

        #expect(throws: StoreError(.invalidEntry)) { try PasskeyStore.load(path: path) }
        do {
            _ = try PasskeyStore.load(path: path)
        } catch {
            #expect(error.description == "\(path): invalid entry: \(unusable.reason)")
        }
        // Neither a save nor an update rewrites the damaged file.
        var store = PasskeyStore(path: path, passkeys: try StoreSamples.passkeys(count: 1, seed: "other"))
        #expect(throws: StoreError(.invalidEntry)) { try store.save() }
        #expect(throws: StoreError(.invalidEntry)) { try store.update { _ in ((), true) } }
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: path))) == bytes)
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date == before)
    }

    @Test("the largest P-256 scalar (n − 1) is a usable private key")
    func largestScalarLoads() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("passkeys.json")
        var largest = UnusablePasskey.curveOrder
        largest[31] -= 1
        let edge = UnusablePasskey(
            name: "n − 1", member: "privateKey", valueJSON: UnusablePasskey.key(largest), reason: "")
        try Data(try edge.bytes()).write(to: URL(fileURLWithPath: path))
        #expect(try PasskeyStore.load(path: path).passkeys[1].privateKey == largest)
    }

    @Test("saving a passkey the phone could not use is refused and writes nothing")
    func saveRefusesUnusablePasskey() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var passkeys = try StoreSamples.passkeys(count: 2)
        passkeys[1].privateKey = Array(repeating: 0, count: 32)
        do {
            try PasskeyStore(path: directory.file("passkeys.json"), passkeys: passkeys).save()
            Issue.record("saved a zero private key")
        } catch {
            #expect(error.description.hasSuffix(": invalid entry: passkeys[1].privateKey: not a P-256 private key"))
        }
        #expect(try directory.contents().isEmpty)
    }
}
