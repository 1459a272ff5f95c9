import Foundation
import HybridCore
import HybridRuntime
@testable import HybridSim
import Synchronization
import Testing

/// How a running `phone --listen` learns that `phone --unlink` revoked its token: the store watch,
/// and the check every push gets (for a push that arrives before the watch noticed).
@Suite struct ListenTokenWatchTests {
    /// A link store with a fresh identity in a new directory.
    func store() throws -> (path: String, identity: PhoneLinkStore.Identity) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hybridsim-watch-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = PhoneLinkStore.path(besidePasskeyStore: directory + "/passkeys.json")
        let identity = PhoneLinkStore.Identity()
        try PhoneLinkStore(path: path, identity: identity).save()
        return (path, identity)
    }

    func unlink(_ path: String) throws {
        var store = try PhoneLinkStore.load(path: path)
        store.identity?.rotateContactID()
        try store.save()
    }

    @Test("the watch says false once the store holds another token, and stays false; a rewrite that keeps the token is still current")
    func watchFollowsTheStore() throws {
        let (path, identity) = try store()
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let watch = ListenTokenWatch(path: path, contactID: identity.contactID)
        #expect(watch.isCurrent())
        var kept = try PhoneLinkStore.load(path: path)
        _ = kept.identity?.newLink()  // a QR link made meanwhile rewrites the file, same token
        try kept.save()
        #expect(watch.isCurrent())
        try unlink(path)
        #expect(!watch.isCurrent())
        try PhoneLinkStore(path: path, identity: identity).save()  // even the old token written back
        #expect(!watch.isCurrent(), "a revoked token stays revoked for this listener")
    }

    @Test("an unlink written before the watch starts is seen by its first question (no stamp taken at start)")
    func unlinkBeforeTheWatch() throws {
        let (path, identity) = try store()
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        try unlink(path)
        #expect(!ListenTokenWatch(path: path, contactID: identity.contactID).isCurrent())
    }

    @Test("a store that is missing or damaged counts as unchanged (the listener keeps its token)")
    func unreadableStoreIsCurrent() throws {
        let (path, identity) = try store()
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let watch = ListenTokenWatch(path: path, contactID: identity.contactID)
        try Data("{not json".utf8).write(to: URL(fileURLWithPath: path))
        #expect(watch.isCurrent())
        try FileManager.default.removeItem(atPath: path)
        #expect(watch.isCurrent())
    }

    @Test("a push for the old contact ID that arrives before the switch is refused as revoked, and says so")
    func pushForTheOldIDIsRevoked() async throws {
        let (path, identity) = try store()
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        var linked = identity
        let link = linked.newLink()
        try PhoneLinkStore(path: path, identity: linked).save()
        try unlink(path)
        let lines = Mutex<[String]>([])
        let output = ProgramOutput(standardOutput: { _ in }, standardError: { line in lines.withLock { $0.append(line) } })
        let payload = ClientPayload(pairingID: link.pairingID, clientNonce: Array(repeating: 7, count: 16), requestType: .getAssertion)
        let push = PushMessage(tunnelID: Array(repeating: 1, count: 16), routingID: [1, 2, 3], clientPayload: payload.cbor)
        let verdict = await PhoneListenProgram.answer(
            push, phone: PhoneConfiguration(qr: .url("-")), passkeyPath: path + ".passkeys", linkStorePath: path,
            contactID: identity.contactID, seen: SeenNonces(), relayURL: "ws://127.0.0.1:1",
            proximity: try ProximityEndpoint(parsing: "udp://127.0.0.1:1"),
            narrator: PhoneNarrator(output: output, json: false, relayURL: "", proximityURL: "", rssi: 0))
        guard case .revoked = verdict else {
            Issue.record("not refused as revoked: \(verdict)")
            return
        }
        #expect(lines.withLock { $0 } == ["refused the contact request: its contact ID was revoked (--unlink)"])
    }
}
