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
