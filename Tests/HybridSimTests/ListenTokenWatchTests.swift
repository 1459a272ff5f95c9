import Foundation
import HybridCore
import HybridRuntime
@testable import HybridSim
import Synchronization
import Testing

/// How a running `phone --listen` learns that `phone --unlink` revoked its token: the store watch,
/// and the check every push gets (for a push that arrives before the watch noticed); and how it
/// tells a push the relay sent again from a replay (`PhoneListenProgram.answer`).
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

    @Test("a push the relay sends again (same nonce, same tunnel) is tried again, ignored once answered; the same nonce for another tunnel is a replay")
    func pushSentAgain() async throws {
        let (path, identity) = try store()
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        var linked = identity
        let link = linked.newLink()
        try PhoneLinkStore(path: path, identity: linked).save()
        let lines = Mutex<[String]>([])
        let output = ProgramOutput(standardOutput: { _ in }, standardError: { line in lines.withLock { $0.append(line) } })
        let nonce = Array(repeating: UInt8(9), count: 16)
        let payload = ClientPayload(pairingID: link.pairingID, clientNonce: nonce, requestType: .getAssertion)
        let tunnel = Array(repeating: UInt8(1), count: 16)
        let seen = SeenNonces()
        func answer(tunnelID: [UInt8]) async throws -> (PhoneListener.Verdict, [String]) {
            lines.withLock { $0 = [] }
            // The relay at port 1 refuses: a push that is tried fails at joining its tunnel.
            var phone = PhoneConfiguration(qr: .url("-"))
            phone.timeout = .seconds(2)
            let verdict = await PhoneListenProgram.answer(
                PushMessage(tunnelID: tunnelID, routingID: [1, 2, 3], clientPayload: payload.cbor),
                phone: phone, passkeyPath: path + ".passkeys", linkStorePath: path,
                contactID: identity.contactID, seen: seen, relayURL: "ws://127.0.0.1:1",
                proximity: try ProximityEndpoint(parsing: "udp://127.0.0.1:1"),
                narrator: PhoneNarrator(output: output, json: false, relayURL: "", proximityURL: "", rssi: 0))
            return (verdict, lines.withLock { $0 })
        }
        // First sight: tried (and failed at joining).
        let (first, firstLines) = try await answer(tunnelID: tunnel)
        guard case .failed = first else { Issue.record("first push: \(first) \(firstLines)"); return }
        #expect(!firstLines.contains { $0.contains("again") }, "\(firstLines)")
        // Sent again for the same tunnel, not answered yet: tried again, and said so.
        let (again, againLines) = try await answer(tunnelID: tunnel)
        guard case .failed = again else { Issue.record("push sent again: \(again) \(againLines)"); return }
        #expect(againLines.first == "the relay sent this contact request again (the first try did not reach its tunnel): trying again",
                "\(againLines)")
        #expect(againLines.count > 1, "it was tried: \(againLines)")
        // Once answered, the same push again is ignored without a try.
        seen.answered(nonce)
        let (answered, answeredLines) = try await answer(tunnelID: tunnel)
        guard case .failed(let reason) = answered else { Issue.record("answered push again: \(answered)"); return }
        #expect(reason == "the relay sent an answered contact request again")
        #expect(answeredLines == ["ignored a contact request the relay sent again: this phone answered it already"])
        // The nonce with another tunnel: a replayed client payload, refused.
        let (replayed, replayedLines) = try await answer(tunnelID: Array(repeating: 2, count: 16))
        guard case .refused(let why) = replayed else { Issue.record("replay: \(replayed)"); return }
        #expect(why == "replayed client payload")
        #expect(replayedLines == ["refused the contact request: replayed client payload"])
    }
}
