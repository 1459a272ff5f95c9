import CTAP2
import Foundation
import HybridCore
import HybridFiles
import HybridSim
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Several processes on one store: the save merges under a lock, unknown members survive, and
/// nothing is followed through a symlink (Docs/STORES.md, "Concurrent writers").
@Suite("Stores: locking, merging, unknown members")
struct StoreConcurrencyTests {
    @Test("two phones that loaded the same store each add a passkey: both are kept")
    func bothPasskeysKept() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("passkeys.json")
        let samples = try StoreSamples.passkeys(count: 3)
        try PasskeyStore(path: path, passkeys: [samples[0]]).save()

        var first = try PasskeyStore.load(path: path)
        var second = try PasskeyStore.load(path: path)
        first.upsert(samples[1])
        second.upsert(samples[2])
        try first.save()
        try second.save()  // before the merge this rename dropped samples[1] and its private key
        let stored = try PasskeyStore.load(path: path)
        #expect(Set(stored.passkeys.map(\.credentialID)) == Set(samples.map(\.credentialID)))
        #expect(stored.passkey(credentialId: samples[1].credentialID)?.privateKey == samples[1].privateKey)
    }

    @Test("a stale save never moves a counter backwards (phone signCount, relying-party counter)")
    func countersNeverGoBackwards() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let passkeyPath = directory.file("passkeys.json")
        let passkey = try StoreSamples.passkeys(count: 1)[0]
        try PasskeyStore(path: passkeyPath, passkeys: [passkey]).save()
        var stale = try PasskeyStore.load(path: passkeyPath)
        var fresh = try PasskeyStore.load(path: passkeyPath)
        fresh.passkeys[0].signCount = 9
        try fresh.save()
        stale.passkeys[0].signCount = 4
        try stale.save()
        #expect(try PasskeyStore.load(path: passkeyPath).passkeys[0].signCount == 9)

        let rpPath = directory.file("rp-credentials.json")
        let credentials = try StoreSamples.credentials(count: 2)
        try RelyingPartyStore(path: rpPath, credentials: credentials).save()
        var desktopA = try RelyingPartyStore.load(path: rpPath)
        var desktopB = try RelyingPartyStore.load(path: rpPath)
        desktopB.credentials[0].signCount = 7
        try desktopB.save()
        desktopA.credentials[0].signCount = 6
        try desktopA.save()
        let stored = try RelyingPartyStore.load(path: rpPath)
        #expect(stored.credential(id: credentials[0].credentialId)?.signCount == 7)
        #expect(stored.credentials.count == 2)
    }

    @Test("a credential removed on purpose stays removed; one another desktop added is kept")
    func removalIsKept() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("rp-credentials.json")
        let credentials = try StoreSamples.credentials(count: 3)
        try RelyingPartyStore(path: path, credentials: Array(credentials.prefix(2))).save()
        var remover = try RelyingPartyStore.load(path: path)
        var adder = try RelyingPartyStore.load(path: path)
        adder.upsert(credentials[2])
        try adder.save()
        remover.remove(id: credentials[0].credentialId)
        try remover.save()
        let ids = try RelyingPartyStore.load(path: path).credentials.map(\.credentialId)
        #expect(Set(ids) == [credentials[1].credentialId, credentials[2].credentialId])
    }

    @Test("unknown members (top level and inside entries) survive a rewrite by this build")
    func unknownMembersSurvive() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("passkeys.json")
        let samples = try StoreSamples.passkeys(count: 2)
        var entry = try #require(
            try JSONSerialization.jsonObject(with: JSONEncoder().encode(samples[0])) as? [String: Any])
        entry["futureField"] = ["nested": [1, 2, 3]]
        entry["transports"] = ["hybrid"]
        let document: [String: Any] = ["version": 1, "passkeys": [entry], "identity": ["name": "Pixel"]]
        try JSONSerialization.data(withJSONObject: document).write(to: URL(fileURLWithPath: path))

        var store = try PasskeyStore.load(path: path)
        store.passkeys[0].signCount = 5
        store.upsert(samples[1])
        try store.save()

        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        #expect((object["identity"] as? [String: Any])?["name"] as? String == "Pixel")
        let entries = try #require(object["passkeys"] as? [[String: Any]])
        #expect(entries.count == 2)
        #expect(((entries[0]["futureField"] as? [String: Any])?["nested"] as? [Int]) == [1, 2, 3])
        #expect(entries[0]["transports"] as? [String] == ["hybrid"])
        #expect(entries[0]["signCount"] as? Int == 5)
        #expect(entries[1]["futureField"] == nil)
        #expect(try PasskeyStore.load(path: path).passkeys.map(\.signCount) == [5, 0])

        // The relying-party store alike.
        let rpPath = directory.file("rp-credentials.json")
        let credential = try StoreSamples.credentials(count: 1)[0]
        var rpEntry = try #require(
            try JSONSerialization.jsonObject(with: JSONEncoder().encode(credential)) as? [String: Any])
        rpEntry["uvInitialized"] = true
        try JSONSerialization.data(withJSONObject: ["version": 1, "credentials": [rpEntry], "note": "x"])
            .write(to: URL(fileURLWithPath: rpPath))
        var rpStore = try RelyingPartyStore.load(path: rpPath)
        rpStore.credentials[0].signCount = 3
        try rpStore.save()
        let rpObject = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: rpPath))) as? [String: Any])
        #expect(rpObject["note"] as? String == "x")
        #expect((rpObject["credentials"] as? [[String: Any]])?.first?["uvInitialized"] as? Bool == true)
        #expect(try RelyingPartyStore.load(path: rpPath).credentials[0].signCount == 3)
    }

    @Test("a symlink at the store path is refused, not followed; a damaged file is not overwritten by a save")
    func symlinkAndDamagedFile() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let target = directory.file("elsewhere.json")
        try PasskeyStore(path: target, passkeys: try StoreSamples.passkeys(count: 1)).save()
        let path = directory.file("passkeys.json")
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: target)
        do {
            _ = try PasskeyStore.load(path: path)
            Issue.record("a symlinked store was loaded")
        } catch {
            #expect(error == StoreError(.unreadable))
            #expect(
                error.reason == "is a symbolic link, which is not followed: give the path of the file it points to, or put that file in its place",
                "\(error)")
        }

        let damaged = directory.file("damaged.json")
        try Data("{\"version\": 1, \"passk".utf8).write(to: URL(fileURLWithPath: damaged))
        #expect(throws: StoreError(.notJSON)) {
            try PasskeyStore(path: damaged, passkeys: try StoreSamples.passkeys(count: 1)).save()
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: damaged)) == Data("{\"version\": 1, \"passk".utf8))
    }

    @Test("a loop among the directories above a store is the system's ELOOP, not blamed on the store or its lock file as a link")
    func directoryLoopIsNotALink() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try FileManager.default.createSymbolicLink(atPath: directory.file("a"), withDestinationPath: directory.file("b"))
        try FileManager.default.createSymbolicLink(atPath: directory.file("b"), withDestinationPath: directory.file("a"))
        let path = directory.file("a") + "/passkeys.json"
        do {
            _ = try PasskeyStore.load(path: path)
            Issue.record("loaded through a loop")
        } catch {
            #expect(!error.reason.contains("is a symbolic link"), "\(error)")
            #expect(error.reason.lowercased().contains("symbolic links"), "the system's words for ELOOP: \(error)")
        }
        // The lock file's own open meets the loop first when the store is written.
        let store = PasskeyStore(path: directory.file("a") + "/sub/passkeys.json", passkeys: [])
        #expect(throws: StoreError.self) { try store.save() }
        #expect(FileReader.isSymbolicLink(directory.file("a")) && !FileReader.isSymbolicLink(path))
    }

    @Test("a symlink at the lock file's path is refused in words, and its target is left alone")
    func symlinkedLockFile() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let target = directory.file("someone-else")
        try Data("theirs".utf8).write(to: URL(fileURLWithPath: target))
        let path = directory.file("passkeys.json")
        try FileManager.default.createSymbolicLink(atPath: path + ".lock", withDestinationPath: target)
        let store = PasskeyStore(path: path, passkeys: try StoreSamples.passkeys(count: 1))
        do {
            try store.save()
            Issue.record("saved through a symlinked lock file")
        } catch {
            #expect(error == StoreError(.locked))
            #expect(
                error.reason == "cannot open the lock file \(path).lock: it is a symbolic link, which is not followed (remove it: the next run makes a new lock file)",
                "\(error)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == Data("theirs".utf8))
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test("a writer that cannot get the lock in time fails with `locked`, and writes nothing")
    func lockTimeout() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("passkeys.json")
        try PasskeyStore(path: path, passkeys: []).save()
        let holder = open(path + ".lock", O_RDWR | O_CLOEXEC)
        #expect(holder >= 0)
        defer { close(holder) }
        // flock locks are per open file description: this one conflicts with the store's own.
        #expect(flock(holder, LOCK_EX) == 0)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        var store = try PasskeyStore.load(path: path)
        #expect(throws: StoreError(.locked)) {
            try store.update(wait: .milliseconds(200)) { passkeys in
                passkeys.removeAll()
                return ((), true)
            }
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
    }
}

@Suite("Authenticator: the signature counter never wraps")
struct SignCountLimitTests {
    @Test("a passkey at signCount 2^32-1 is refused with CTAP2_ERR_LIMIT_EXCEEDED, the counter unchanged")
    func exhaustedCounter() throws {
        var fixture = CeremonyFixture(seed: "sign-count-limit")
        _ = try fixture.register()
        fixture.authenticator.passkeys[0].signCount = UInt32.max - 1
        let last = try fixture.authenticate()
        #expect(last.passkey.signCount == UInt32.max)

        let request = GetAssertionRequest(
            rpId: CeremonyFixture.rpId, clientDataHash: [UInt8](repeating: 7, count: 32),
            options: AuthenticatorOptions(uv: true))
        let (bytes, outcome) = fixture.authenticator.handle(
            CTAP2Request.getAssertion(request).encode(), policy: .init(), now: CeremonyFixture.now)
        guard case .refused(let status, let reason) = outcome else {
            Issue.record("expected a refusal, got \(outcome)")
            return
        }
        #expect(status == .limitExceeded)
        #expect(reason.contains("signature counter"))
        #expect(bytes == [CTAP2StatusCode.limitExceeded.rawValue])
        #expect(fixture.authenticator.passkeys[0].signCount == UInt32.max)
    }
}

/// The directory fsync after the rename is checked: a real I/O error is reported, the file systems
/// that cannot sync a directory are accepted.
@Suite("Store writes: directory fsync result")
struct StoreDirectorySyncTests {
    @Test("EIO from the directory fsync is a writeFailed error naming it; EINVAL, ENOTSUP, EROFS are accepted")
    func directorySync() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hybridsim-dirsync-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/passkeys.json"
        do {
            try AtomicFileFaults.write(Array("{}".utf8), to: path, directorySyncErrno: EIO)
            Issue.record("a failed directory fsync was ignored")
        } catch {
            #expect(error.code == .writeFailed)
            #expect(error.description.contains("cannot fsync"), "\(error)")
        }
        // The rename happened before the sync: the new content is in place, only its durability is in doubt.
        #expect(FileManager.default.contents(atPath: path) == Data("{}".utf8))
        for accepted in [EINVAL, ENOTSUP, EROFS] {
            try AtomicFileFaults.write(Array("[]".utf8), to: path, directorySyncErrno: accepted)
        }
        #expect(FileManager.default.contents(atPath: path) == Data("[]".utf8))
    }

    @Test("a save larger than a store may be read back is refused and writes nothing: the store stays usable")
    func oversizedSave() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hybridsim-oversize-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/rp-credentials.json"
        try AtomicFileFaults.write(Array("{}".utf8), to: path, directorySyncErrno: EINVAL)
        let limit = 16 << 20
        do {
            try AtomicFileFaults.write([UInt8](repeating: 0x20, count: limit + 1), to: path, directorySyncErrno: EINVAL)
            Issue.record("a save past the read limit was written")
        } catch {
            #expect(error.code == .writeFailed)
            #expect(error.description.contains("it would be \(limit + 1) bytes, more than the \(limit) a store may have"), "\(error)")
        }
        #expect(FileManager.default.contents(atPath: path) == Data("{}".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["rp-credentials.json"])
        try AtomicFileFaults.write([UInt8](repeating: 0x20, count: limit), to: path, directorySyncErrno: EINVAL)
    }
}
