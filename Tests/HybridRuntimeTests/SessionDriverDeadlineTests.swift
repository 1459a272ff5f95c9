import CTAP2
import HybridCore
import HybridRuntime
import Synchronization
import Testing

/// A tunnel whose `failingSend`-th send throws, as when the relay or the phone already closed.
private final class FailingSendTunnel: TunnelTransport {
    let inner: any TunnelTransport
    let failingSend: Int
    private let sent = Mutex(0)

    init(_ inner: any TunnelTransport, failingSend: Int) {
        self.inner = inner
        self.failingSend = failingSend
    }

    func send(_ message: [UInt8]) async throws {
        let count = sent.withLock { count in
            count += 1
            return count
        }
        if count == failingSend { throw RuntimeError(.closed, "the tunnel closed under the send") }
        try await inner.send(message)
    }

    func receive(timeout: Duration) async throws -> [UInt8] { try await inner.receive(timeout: timeout) }
    func receiveIfReady() -> [UInt8]? { inner.receiveIfReady() }
    func close(code: WebSocketCloseCode, reason: String) async { await inner.close(code: code, reason: reason) }
}

@Suite("Session drivers: the response wins, whole-transaction deadline", .timeLimit(.minutes(1)))
struct SessionDriverDeadlineTests {
    @Test("a failed shutdown send does not throw away the verified response")
    func responseWinsOverShutdown() async throws {
        try await withHarness { harness in
            let account = Account.make("dora")
            var rig = SessionRig(relayURL: harness.relayURL, phone: SimulatedPhone(passkeys: [account.passkey]))
            // Desktop sends: 1 handshake, 2 request, 3 shutdown.
            rig.desktopTransports = { $0.wrappingTunnel { FailingSendTunnel($0, failingSend: 3) } }
            let authentication = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
            let outcome = try await rig.run(request: authentication.requestBytes, hint: .getAssertion)
            let response = try outcome.desktop.get().response
            let (signedIn, _) = try authentication.verify(response: response, knownCredentials: [account.credential])
            #expect(signedIn.signCount == 1)
        }
    }

    @Test("a responder that outlasts the phone's userAction limit: the phone answers CTAP2_ERR_USER_ACTION_TIMEOUT, which the desktop receives before its own wait ends, and then fails with the timeout; the responder is cancelled")
    func userActionTimeoutIsAnswered() async throws {
        try await withHarness { harness in
            let account = Account.make("fay")
            var rig = SessionRig(relayURL: harness.relayURL, phone: SimulatedPhone(passkeys: [account.passkey]))
            // The desktop would wait 20 s for the answer: the phone's 0x2F must end it long before.
            rig.timeouts = SessionTimeouts(
                advert: .seconds(5), connect: .seconds(5), handshake: .seconds(5), message: .seconds(5), userAction: .seconds(20))
            var phoneTimeouts = rig.timeouts
            phoneTimeouts.userAction = .milliseconds(500)
            rig.phoneTimeouts = phoneTimeouts
            let cancelled = Mutex(false)
            rig.respond = { _ in
                // A user who never answers; only the driver's cancellation ends the wait.
                let (never, _) = AsyncStream<Void>.makeStream()
                for await _ in never {}
                cancelled.withLock { $0 = Task.isCancelled }
                return CTAP2Response.error(.operationDenied).encode()
            }
            let sent = Mutex<[UInt8]>([])
            rig.events = { event in if case .responseSent(let status, _) = event { sent.withLock { $0.append(status) } } }
            let authentication = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
            let outcome = try await rig.run(request: authentication.requestBytes, hint: .getAssertion)

            let response = try outcome.desktop.get().response
            #expect(response == [CTAP2StatusCode.userActionTimeout.rawValue], "the desktop received \(response)")
            let phone = try #require(outcome.phoneError())
            #expect(phone.step == "answering the request")
            #expect(phone.runtimeCode == .timeout, "\(phone)")
            #expect(sent.withLock { $0 } == [0x2F], "one response, the timeout's")
            #expect(outcome.elapsed < .seconds(10), "the desktop waited out its own limit: \(outcome.elapsed)")
            // The responder notices its cancellation on its own task: a condition poll with a deadline.
            let deadline = ContinuousClock.now + .seconds(5)
            while !cancelled.withLock({ $0 }), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            #expect(cancelled.withLock { $0 }, "the responder's task was cancelled")
        }
    }

    @Test("a transaction ends at its whole-transaction deadline even when every single wait is longer")
    func wholeTransactionDeadline() async throws {
        try await withHarness { harness in
            let account = Account.make("erin")
            var rig = SessionRig(relayURL: harness.relayURL, phone: SimulatedPhone(passkeys: [account.passkey]))
            rig.timeouts = SessionTimeouts(
                advert: .seconds(20), connect: .seconds(20), handshake: .seconds(20), message: .seconds(20),
                userAction: .seconds(20), transaction: .seconds(3))
            // The desktop never sees the phone's response: it would wait the full 20 s userAction.
            let requestSent = Mutex(false)
            rig.desktopTransports = {
                $0.wrappingTunnel { tunnel in
                    TunnelTap(
                        tunnel,
                        afterSend: { sent, _ in if sent == 2 { requestSent.withLock { $0 = true } } },
                        onReceive: { _, message in requestSent.withLock { $0 } ? nil : message })
                }
            }
            let authentication = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
            let outcome = try await rig.run(request: authentication.requestBytes, hint: .getAssertion)
            // Both sides have the same 3 s budget: whichever runs out first ends the transaction.
            // When the desktop's runs out first, its error is the whole-transaction timeout. When the
            // phone's runs out first, the phone was waiting for the shutdown after its response:
            // that silence ends the phone's transaction successfully (PeerTolerance.isSilence), and
            // the phone's close then ends the desktop's wait.
            let desktop = try #require(outcome.desktopError())
            if desktop.description.contains("the whole transaction") {
                #expect(desktop.runtimeCode == .timeout)
            } else {
                if case .failure(let error) = outcome.phone { Issue.record("the phone failed: \(error)") }
                #expect(desktop.runtimeCode == .closed, "desktop: \(desktop)")
            }
            #expect(outcome.elapsed >= .seconds(2.5), "ended before the 3 s budget: \(outcome.elapsed)")
            #expect(outcome.elapsed < .seconds(15), "took \(outcome.elapsed)")
        }
    }
}
