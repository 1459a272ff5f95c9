import CTAP2
import HybridCore
import HybridRuntime
import Testing

/// The phone's tolerance of desktops that close the tunnel instead of sending kShutdown
/// (revision 0 desktops, other client implementations): Docs/PROTOCOL-TOLERANCE.md.
@Suite("Phone: a desktop that closes, or stays silent, without a shutdown message", .timeLimit(.minutes(1)))
struct SessionDriverPeerToleranceTests {
    /// One sign-in whose desktop closes with `code` (or, with `nil`, says nothing until the phone's
    /// wait runs out) instead of sending kShutdown: the phone's tunnel replaces the desktop's third
    /// message (its shutdown) by what the phone sees when a desktop closes the WebSocket after
    /// reading the response (the relay forwards the close code).
    private func signIn(closingWith code: WebSocketCloseCode?) async throws -> (InMemoryLab.Run, Ceremony.Authentication, Account) {
        let account = Account.make("erin")
        let phone = SimulatedPhone(passkeys: [account.passkey])
        var lab = InMemoryLab()
        lab.wrapPhoneTunnel = { tunnel in ClosingInsteadOfShutdown(inner: tunnel, code: code) }
        let authentication = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
        let run = try await lab.transact(request: authentication.requestBytes, hint: .getAssertion, phone: phone)
        return (run, authentication, account)
    }

    @Test("a normal close (1000) after the response ends the transaction successfully, with a closedAfterResponse event")
    func normalCloseAfterResponse() async throws {
        let (run, authentication, account) = try await signIn(closingWith: .normalClosure)
        let (signedIn, _) = try authentication.verify(response: run.outcome.response, knownCredentials: [account.credential])
        #expect(signedIn.signCount == 1)
        #expect(!run.phoneEvents.contains(.shutdownReceived))
        #expect(run.phoneEvents.last == .closedAfterResponse(reason: "tunnel closed with 1000 (normal closure): desktop done"))
    }

    @Test("going away (1001, also the relay's code when the desktop's connection simply ended) is orderly too")
    func goingAwayAfterResponse() async throws {
        let (run, _, _) = try await signIn(closingWith: .goingAway)
        #expect(run.phoneEvents.contains { if case .closedAfterResponse = $0 { true } else { false } })
    }

    /// Chromium's phone has no timeout once its response is out (`transaction_done_`); a desktop
    /// that keeps the tunnel open after the response used to make the phone fail after 10 s.
    @Test("no shutdown and no close within the wait after the response: the transaction ended successfully")
    func silenceAfterResponse() async throws {
        let (run, authentication, account) = try await signIn(closingWith: nil)
        _ = try authentication.verify(response: run.outcome.response, knownCredentials: [account.credential])
        #expect(!run.phoneEvents.contains(.shutdownReceived))
        #expect(run.phoneEvents.last == .closedAfterResponse(reason: "the desktop's silence timed out after 10 s"))
    }

    @Test("an abnormal close (1006) after the response is still an error naming the step")
    func abnormalCloseAfterResponse() async throws {
        do {
            _ = try await signIn(closingWith: .abnormalClosure)
            Issue.record("an abnormal close was taken as the end of the transaction")
        } catch let error as TransactionError {
            #expect(error.side == .phone)
            #expect(error.step == "waiting for the desktop to end the transaction")
            #expect((error.underlying as? RuntimeError)?.closeCode == .abnormalClosure)
        }
    }
}

/// Hands through the handshake and the request, then reports the tunnel closed with `code`, or
/// (`nil`) the wait for the next message timed out.
private final class ClosingInsteadOfShutdown: TunnelTransport {
    let inner: any TunnelTransport
    let code: WebSocketCloseCode?
    private let received = LockedBox(0)

    init(inner: any TunnelTransport, code: WebSocketCloseCode?) {
        self.inner = inner
        self.code = code
    }

    func send(_ message: [UInt8]) async throws { try await inner.send(message) }

    func receive(timeout: Duration) async throws -> [UInt8] {
        let message = try await inner.receive(timeout: timeout)
        received.update { $0 += 1 }
        if received.value >= 3 {
            guard let code else { throw RuntimeError.timeout("the desktop's silence", after: .seconds(10)) }
            throw RuntimeError.closed(code, "desktop done")
        }
        return message
    }

    /// Nothing: what arrives is counted and replaced by `receive` only.
    func receiveIfReady() -> [UInt8]? { nil }

    func close(code: WebSocketCloseCode, reason: String) async { await inner.close(code: code, reason: reason) }
}
