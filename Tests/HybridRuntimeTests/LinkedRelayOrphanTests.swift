import CTAP2
import HybridCore
import HybridRuntime
import Testing

/// A push that no phone joins because its listener went away (killed, restarted, frozen while it
/// unlinked): the desktop is told and the phone is not left "busy" (409) until the tunnel times out.
/// A soak of a long-running linked phone found both (a 60 s 409 after a listener restart).
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

    @Test("a new listener for the same contact ID (a restarted phone) ends the unjoined push's tunnel at once, and the phone takes the next contact (not 409)")
    func listenerReplacedBeforeJoining() async throws {
        try await withUnjoinedPush("orphan-replaced") { endpoint, token, desktop in
            let restarted = try await LinkedRelayTests.listen(endpoint, token)
            let error = await expectRuntimeError(.closed) { _ = try await desktop.receive(timeout: .seconds(5)) }
            #expect(error?.closeCode == .goingAway, "\(String(describing: error))")
            #expect(error?.reason.contains("the linked phone's push channel was replaced before it joined the tunnel") == true, "\(String(describing: error))")
            let next = try await LinkedRelayTests.contact(endpoint, token.contactID, header: LinkedRelayTests.payload().headerValue)
            await next.close()
            await restarted.close()
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
}
