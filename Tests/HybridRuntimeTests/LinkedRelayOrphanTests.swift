import CTAP2
import HybridCore
import HybridRuntime
import Testing

/// A push that no phone joins because its listener went away (killed, restarted, frozen while it
/// unlinked): the phone gets it again when it listens again, or the desktop is told, and the phone
/// is not left "busy" (409) until the tunnel times out. A soak of a long-running linked phone found
/// a 60 s 409 after a listener restart.
@Suite("Relay: pushes whose listener went away", .serialized, .timeLimit(.minutes(1)))
struct LinkedRelayOrphanTests {
    @Test("the listener closes before joining: after the contact wait the desktop's tunnel closes with 1001 and why, and the next contact for the phone is not 409")
    func listenerGoneBeforeJoining() async throws {
        try await withRelay(LinkedRelayTests.configuration) { _, endpoint in
            let token = LinkedRelayTests.token("orphan-gone")
            let listener = try await LinkedRelayTests.listen(endpoint, token)
            let desktop = try await LinkedRelayTests.contact(endpoint, token.contactID, header: LinkedRelayTests.payload().headerValue)
            _ = try await listener.receive(timeout: .seconds(2))  // the push, never acted on
            let start = ContinuousClock.now
            await listener.close()
            let error = await expectRuntimeError(.closed) { _ = try await desktop.receive(timeout: .seconds(5)) }
            #expect(error?.closeCode == .goingAway, "\(String(describing: error))")
            #expect(error?.reason.contains("the linked phone's push channel closed before it joined the tunnel") == true, "\(String(describing: error))")
            // Not at once: the phone had the contact wait (300 ms here) to join anyway.
            let waited = ContinuousClock.now - start
            #expect(waited >= .milliseconds(250) && waited < .seconds(3), "\(waited)")
            let back = try await LinkedRelayTests.listen(endpoint, token)
            let next = try await LinkedRelayTests.contact(endpoint, token.contactID, header: LinkedRelayTests.payload().headerValue)
            await next.close()
            await back.close()
        }
    }

    /// A relay with a 30 s contact wait (only what a test does can end the push in time), a phone
    /// listening on `name`'s contact ID and a desktop whose contact was pushed to it and not joined.
    private func withUnjoinedPush(
        _ name: String,
        _ body: (RelayEndpoint, ListenToken, WebSocketTunnel) async throws -> Void
    ) async throws {
        var configuration = LinkedRelayTests.configuration
        configuration.contactWait = .seconds(30)
        try await withRelay(configuration) { _, endpoint in
            let token = LinkedRelayTests.token(name)
            let frozen = try await LinkedRelayTests.listen(endpoint, token)
            let desktop = try await LinkedRelayTests.contact(endpoint, token.contactID, header: LinkedRelayTests.payload().headerValue)
            try await body(endpoint, token, desktop)
            await frozen.close()
        }
    }

    @Test("a new listener for the same contact ID (a restarted phone, an FCM-style client reconnecting) gets the unjoined push again, joins with it, and the desktop gets its answer")
    func listenerReplacedBeforeJoining() async throws {
        try await withUnjoinedPush("orphan-replaced") { endpoint, token, desktop in
            let restarted = try await LinkedRelayTests.listen(endpoint, token)
            let bytes = try await restarted.receive(timeout: .seconds(5))
            let push = try PushMessage(bytes: bytes)
            try await desktop.send([1, 2, 3])
            let phone = try await WebSocketTunnel.open(
                url: endpoint.url + TunnelServicePath.connect(routingID: push.routingID, tunnelID: push.tunnelID).path, timeout: .seconds(5))
            #expect(try await phone.receive(timeout: .seconds(5)) == [1, 2, 3])
            try await phone.send([4])
            #expect(try await desktop.receive(timeout: .seconds(5)) == [4])
            await phone.close()
            await desktop.close()
            // Joined: a listener after that gets nothing again, and the next desktop gets through (not 409).
            let later = try await LinkedRelayTests.listen(endpoint, token)
            await expectRuntimeError(.timeout) { _ = try await later.receive(timeout: .milliseconds(300)) }
            let next = try await LinkedRelayTests.contact(endpoint, token.contactID, header: LinkedRelayTests.payload().headerValue)
            #expect(try PushMessage(bytes: try await later.receive(timeout: .seconds(5))).tunnelID != push.tunnelID)
            await next.close()
            await later.close()
            await restarted.close()
        }
    }

    @Test("a push is sent to at most 3 listeners: a fourth listen without a join closes the desktop's tunnel with 1001 and why, and the phone takes the next contact (not 409)")
    func redeliveryIsBounded() async throws {
        try await withUnjoinedPush("orphan-bounded") { endpoint, token, desktop in
            var pushes: [[UInt8]] = [], replaced: [WebSocketTunnel] = []
            for _ in 0..<2 {
                let again = try await LinkedRelayTests.listen(endpoint, token)
                pushes.append(try await again.receive(timeout: .seconds(5)))
                replaced.append(again)
            }
            #expect(pushes.count == 2 && pushes[0] == pushes[1])
            let fourth = try await LinkedRelayTests.listen(endpoint, token)
            let error = await expectRuntimeError(.closed) { _ = try await desktop.receive(timeout: .seconds(5)) }
            #expect(error?.closeCode == .goingAway, "\(String(describing: error))")
            #expect(error?.reason.contains("the linked phone listened again 3 times and never joined the tunnel") == true, "\(String(describing: error))")
            await expectRuntimeError(.timeout) { _ = try await fourth.receive(timeout: .milliseconds(300)) }
            let next = try await LinkedRelayTests.contact(endpoint, token.contactID, header: LinkedRelayTests.payload().headerValue)
            #expect(try PushMessage(bytes: try await fourth.receive(timeout: .seconds(5))).clientPayload.count > 0)
            await next.close()
            await fourth.close()
            for channel in replaced { await channel.close() }
        }
    }

    @Test("a phone that comes back under a new contact ID, announcing the old one revoked (restarted after it unlinked while frozen): the old push's desktop gets 4410 at once")
    func revokedBeforeJoining() async throws {
        try await withUnjoinedPush("orphan-old") { endpoint, old, desktop in
            let fresh = try await LinkedRelayTests.listen(endpoint, LinkedRelayTests.token("orphan-new"), revoked: [old.base64URL])
            let error = await expectRuntimeError(.closed) { _ = try await desktop.receive(timeout: .seconds(5)) }
            #expect(error?.closeCode == .contactRevoked, "\(String(describing: error))")
            await fresh.close()
        }
    }

    @Test("a push sent again to a listener that then goes too gets the whole contact wait from that listener's close, not what was left of the first one's")
    func redeliveredPushGetsItsOwnWait() async throws {
        var configuration = LinkedRelayTests.configuration
        configuration.contactWait = .seconds(1)
        try await withRelay(configuration) { _, endpoint in
            let token = LinkedRelayTests.token("orphan-wait")
            let first = try await LinkedRelayTests.listen(endpoint, token)
            let desktop = try await LinkedRelayTests.contact(endpoint, token.contactID, header: LinkedRelayTests.payload().headerValue)
            _ = try await first.receive(timeout: .seconds(2))
            await first.close()  // its detach starts a 1 s wait
            try await Task.sleep(for: .milliseconds(300))
            let second = try await LinkedRelayTests.listen(endpoint, token)
            _ = try await second.receive(timeout: .seconds(2))  // the push again
            try await Task.sleep(for: .milliseconds(300))
            let secondGone = ContinuousClock.now
            await second.close()
            let error = await expectRuntimeError(.closed) { _ = try await desktop.receive(timeout: .seconds(5)) }
            #expect(error?.reason.contains("closed before it joined the tunnel") == true, "\(String(describing: error))")
            let waited = ContinuousClock.now - secondGone
            #expect(waited >= .milliseconds(900), "closed \(waited) after the second listener went: the first one's timer cut it short")
        }
    }

    @Test("a revocation announced again still ends the unjoined push of that ID with 4410 (the 'nothing changed' shortcut skips only the save)")
    func revocationAnnouncedAgainEndsThePush() async throws {
        try await withUnjoinedPush("orphan-again") { endpoint, old, desktop in
            // The phone marks the ID revoked by refusing another push (its tunnel ID does not match
            // this one), so the ID is already the newest revoked one when the phone listens again.
            let listener = try await LinkedRelayTests.listen(endpoint, old)
            _ = try await listener.receive(timeout: .seconds(2))  // the push, sent again
            try await listener.send(PushRefusal(tunnelID: Array(repeating: 9, count: 16), reason: "contact ID revoked", revoked: true).encoded)
            await expectRuntimeError(.timeout) { _ = try await desktop.receive(timeout: .milliseconds(300)) }
            let fresh = try await LinkedRelayTests.listen(endpoint, LinkedRelayTests.token("orphan-again-new"), revoked: [old.base64URL])
            let error = await expectRuntimeError(.closed) { _ = try await desktop.receive(timeout: .seconds(5)) }
            #expect(error?.closeCode == .contactRevoked, "\(String(describing: error))")
            await fresh.close()
            await listener.close()
        }
    }

    @Test("a refusal of a push the phone has already joined (it got the push twice) does not end the transaction")
    func refusalAfterJoinIgnored() async throws {
        try await withRelay(LinkedRelayTests.configuration) { _, endpoint in
            let token = LinkedRelayTests.token("orphan-joined")
            let listener = try await LinkedRelayTests.listen(endpoint, token)
            let desktop = try await LinkedRelayTests.contact(endpoint, token.contactID, header: LinkedRelayTests.payload().headerValue)
            let push = try PushMessage(bytes: try await listener.receive(timeout: .seconds(2)))
            let phone = try await WebSocketTunnel.open(
                url: endpoint.url + TunnelServicePath.connect(routingID: push.routingID, tunnelID: push.tunnelID).path, timeout: .seconds(5))
            try await listener.send(PushRefusal(tunnelID: push.tunnelID, reason: "replayed client payload").encoded)
            try await Task.sleep(for: .milliseconds(200))
            try await desktop.send([1])
            #expect(try await phone.receive(timeout: .seconds(5)) == [1])
            try await phone.send([2])
            #expect(try await desktop.receive(timeout: .seconds(5)) == [2])
            await phone.close()
            await desktop.close()
            await listener.close()
        }
    }
}
