import CTAP2
import HybridCore
@testable import HybridRuntime
import Synchronization
import Testing

/// A desktop that ends the transaction (kShutdown) while the phone is still answering its request,
/// as Chrome's desktop does when the user cancels: Chromium's phone sends no response and reports
/// the end (`v2_authenticator.cc`, `EOF_WHILE_PROCESSING`). HybridSim's phone used to send the
/// response into the ended transaction and report success.
@Suite("Phone: the desktop ends the transaction while the request is being answered", .timeLimit(.minutes(1)))
struct PhoneShutdownWhileAnsweringTests {
    /// What the desktop sends while the phone answers: its shutdown, or the same message with one
    /// byte flipped (it does not decrypt, so the phone fails on that message instead).
    enum Early: CaseIterable { case shutdown, tamperedShutdown }

    @Test("a message that arrives while the phone answers is read before the response goes out: a shutdown ends the transaction, a tampered one fails it; no response either way", arguments: Early.allCases)
    func earlyMessage(_ early: Early) async throws {
        let account = Account.make("erin")
        let phone = SimulatedPhone(passkeys: [account.passkey])
        // The "user" answers only once the desktop has sent its shutdown.
        let shutdownSent = AsyncStream<Void>.makeStream()
        let answered = Mutex(false)
        var desktop = try await HandDrivenDesktop.start(requestType: .getAssertion, getInfo: phone.getInfo) { request in
            for await _ in shutdownSent.stream {}
            answered.withLock { $0 = true }
            return phone.respond(to: request, now: unixNow())
        }

        // The update message that always follows the post-handshake message (padding only here) is
        // read too, so that whatever waits for the desktop at the end came after the request.
        #expect(try await desktop.receive().isEmpty)
        let authentication = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
        try await desktop.tunnel.send(try desktop.session.encryptRequest(authentication.requestBytes))
        var shutdown = try desktop.session.encryptShutdown()
        if early == .tamperedShutdown { shutdown[shutdown.count / 2] ^= 0x01 }
        try await desktop.tunnel.send(shutdown)
        shutdownSent.continuation.finish()

        let result = await desktop.phone.result
        guard case .failure(let error as TransactionError) = result else {
            Issue.record("the phone did not fail as expected: \(result)")
            return
        }
        #expect(answered.withLock { $0 }, "the responder ran to its end")
        #expect(error.side == .phone && error.step == "answering the request")
        let underlying = try #require(error.underlying as? HybridError, "\(error)")
        switch early {
        case .shutdown:
            #expect(underlying.reason == "the desktop ended the transaction while the request was being answered; the response was not sent")
        case .tamperedShutdown:
            #expect(underlying.code == .decryptionFailed, "\(underlying)")
        }
        // Nothing reached the desktop after its shutdown: no response is waiting for it.
        #expect(desktop.tunnel.receiveIfReady() == nil)
    }
}
