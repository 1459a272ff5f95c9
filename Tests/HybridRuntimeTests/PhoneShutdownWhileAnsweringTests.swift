import Foundation
import CTAP2
import HybridCore
@testable import HybridRuntime
import Synchronization
import Testing

/// A desktop that ends the transaction (kShutdown) or leaves while the phone is still answering its
/// request (its user deciding), as Chrome's desktop does when the user cancels: Chromium's phone
/// sends no response and reports the end (`v2_authenticator.cc`, `EOF_WHILE_PROCESSING`). HybridSim's
/// phone used to send the response into the ended transaction and report success; then it noticed
/// only once its user had answered (and had signed, and counted, for nothing). Now the question is
/// withdrawn (the responder cancelled) as soon as the desktop's message or close arrives.
@Suite("Phone: the desktop ends the transaction while the request is being answered", .timeLimit(.minutes(1)))
struct PhoneShutdownWhileAnsweringTests {
    /// What the desktop does while the phone answers: sends its shutdown, the same message with one
    /// byte flipped (it does not decrypt, so the phone fails on that message instead), or closes.
    enum Early: CaseIterable { case shutdown, tamperedShutdown, close }

    @Test("what the desktop sends or does while the phone's user decides is read at once: a shutdown ends the transaction, a tampered one fails it, a close ends it; the question is withdrawn and no response goes out", arguments: Early.allCases)
    func earlyMessage(_ early: Early) async throws {
        let account = Account.make("erin")
        let phone = SimulatedPhone(passkeys: [account.passkey])
        // The "user" never answers: only the question's withdrawal (the task cancelled) ends the wait.
        let asked = AsyncStream<Void>.makeStream()
        let withdrawn = AsyncStream<Void>.makeStream()
        var desktop = try await HandDrivenDesktop.start(requestType: .getAssertion, getInfo: phone.getInfo) { request in
            asked.continuation.finish()
            let (never, _) = AsyncStream<Void>.makeStream()
            for await _ in never {}
            #expect(Task.isCancelled, "only the question's withdrawal ends the wait")
            withdrawn.continuation.finish()
            return [CTAP2StatusCode.operationDenied.rawValue]
        }

        // The update message that always follows the post-handshake message (padding only here) is
        // read too, so that whatever waits for the desktop at the end came after the request.
        #expect(try await desktop.receive().isEmpty)
        let authentication = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
        try await desktop.tunnel.send(try desktop.session.encryptRequest(authentication.requestBytes))
        for await _ in asked.stream {}
        switch early {
        case .shutdown, .tamperedShutdown:
            var shutdown = try desktop.session.encryptShutdown()
            if early == .tamperedShutdown { shutdown[shutdown.count / 2] ^= 0x01 }
            try await desktop.tunnel.send(shutdown)
        case .close:
            await desktop.tunnel.close(code: .goingAway, reason: "the desktop left")
        }

        let result = await desktop.phone.result
        guard case .failure(let error as TransactionError) = result else {
            Issue.record("the phone did not fail as expected: \(result)")
            return
        }
        // The phone's deadline for its user (5 s) did not end it: the desktop's move did.
        #expect(error.side == .phone && error.step == "answering the request")
        switch early {
        case .shutdown:
            let underlying = try #require(error.underlying as? HybridError, "\(error)")
            #expect(underlying.reason == "the desktop ended the transaction while the request was being answered; the response was not sent")
        case .tamperedShutdown:
            let underlying = try #require(error.underlying as? HybridError, "\(error)")
            #expect(underlying.code == .decryptionFailed, "\(underlying)")
        case .close:
            let underlying = try #require(error.underlying as? RuntimeError, "\(error)")
            #expect(underlying.code == .closed && underlying.closeCode == .goingAway, "\(underlying)")
        }
        // The question was withdrawn (the responder's task cancelled), so nothing was signed.
        for await _ in withdrawn.stream {}
        if early != .close {
            // Nothing reached the desktop after its shutdown: no response is waiting for it.
            #expect(desktop.tunnel.receiveIfReady() == nil)
        }
    }

    /// The phone's end, holding back one message until ``release()``: what the desktop sends after
    /// it is queued by then, as a shutdown in the same write as the request is on a real socket.
    final class HeldMessageTunnel: TunnelTransport {
        let base: InMemoryTunnel
        private let held: Int
        private let received = Mutex(0)
        private let gate = AsyncStream<Void>.makeStream()

        init(_ base: InMemoryTunnel, holding number: Int) {
            self.base = base
            self.held = number
        }

        func release() { gate.continuation.finish() }

        func send(_ message: [UInt8]) async throws { try await base.send(message) }
        func receive(timeout: Duration) async throws -> [UInt8] {
            let message = try await base.receive(timeout: timeout)
            let number = received.withLock { count in
                count += 1
                return count
            }
            if number == held { for await _ in gate.stream {} }
            return message
        }
        func receiveIfReady() -> [UInt8]? { base.receiveIfReady() }
        func awaitIncoming() async { await base.awaitIncoming() }
        func close(code: WebSocketCloseCode, reason: String) async { await base.close(code: code, reason: reason) }
    }

    @Test("a shutdown that came with the request ends the transaction before the request is answered: nothing is signed")
    func shutdownWithTheRequest() async throws {
        let account = Account.make("erin")
        let phone = SimulatedPhone(passkeys: [account.passkey])
        let asked = Mutex(false)
        let held = Mutex<HeldMessageTunnel?>(nil)
        // Message 1 is the handshake, 2 the request.
        var desktop = try await HandDrivenDesktop.start(
            requestType: .getAssertion, getInfo: phone.getInfo,
            phoneTunnel: { end in
                let tunnel = HeldMessageTunnel(end, holding: 2)
                held.withLock { $0 = tunnel }
                return tunnel
            }
        ) { request in
            asked.withLock { $0 = true }
            return phone.respond(to: request, now: unixNow())
        }
        #expect(try await desktop.receive().isEmpty)
        let authentication = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
        try await desktop.tunnel.send(contentsOf: [
            try desktop.session.encryptRequest(authentication.requestBytes), try desktop.session.encryptShutdown(),
        ])
        try #require(held.withLock { $0 }).release()

        let result = await desktop.phone.result
        guard case .failure(let error as TransactionError) = result else {
            Issue.record("the phone did not fail as expected: \(result)")
            return
        }
        let underlying = try #require(error.underlying as? HybridError, "\(error)")
        #expect(underlying.reason == "the desktop ended the transaction while the request was being answered; the response was not sent")
        #expect(!asked.withLock { $0 }, "the responder was never asked")
    }

    /// The phone's end, discarding its `dropped`-th received message (a wrapper that filters what
    /// arrives), and counting the driver's waits for something to arrive.
    final class DroppingTunnel: TunnelTransport {
        let base: InMemoryTunnel
        private let dropped: Int
        private let received = Mutex(0)
        let waits = Mutex(0)

        init(_ base: InMemoryTunnel, dropping number: Int) {
            self.base = base
            self.dropped = number
        }

        /// Whether the message just taken from `base` is the one to drop.
        private func drops() -> Bool {
            received.withLock { count in
                count += 1
                return count == dropped
            }
        }

        func send(_ message: [UInt8]) async throws { try await base.send(message) }
        func receive(timeout: Duration) async throws -> [UInt8] {
            while true {
                let message = try await base.receive(timeout: timeout)
                if !drops() { return message }
            }
        }
        func receiveIfReady() -> [UInt8]? {
            while let message = base.receiveIfReady() {
                if !drops() { return message }
            }
            return nil
        }
        func awaitIncoming() async {
            waits.withLock { $0 += 1 }
            await base.awaitIncoming()
        }
        func close(code: WebSocketCloseCode, reason: String) async { await base.close(code: code, reason: reason) }
    }

    @Test("something arrives while the user decides but a wrapper drops it: nothing after all, the user goes on deciding (no failure, no busy loop), and the answer goes out")
    func droppedArrivalKeepsTheQuestion() async throws {
        let account = Account.make("erin")
        let phone = SimulatedPhone(passkeys: [account.passkey])
        let asked = AsyncStream<Void>.makeStream()
        let answer = AsyncStream<Void>.makeStream()
        let dropping = Mutex<DroppingTunnel?>(nil)
        // Message 1 is the handshake, 2 the request, 3 what the wrapper drops.
        var desktop = try await HandDrivenDesktop.start(
            requestType: .getAssertion, getInfo: phone.getInfo,
            phoneTunnel: { end in
                let tunnel = DroppingTunnel(end, dropping: 3)
                dropping.withLock { $0 = tunnel }
                return tunnel
            }
        ) { request in
            asked.continuation.finish()
            // The user answers when the test says so, after the dropped message came and went.
            for await _ in answer.stream {}
            return phone.respond(to: request, now: unixNow())
        }
        #expect(try await desktop.receive().isEmpty)
        let authentication = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
        try await desktop.tunnel.send(try desktop.session.encryptRequest(authentication.requestBytes))
        for await _ in asked.stream {}
        // The driver watches the tunnel once its user has been deciding for 20 ms.
        let tunnel = try #require(dropping.withLock { $0 })
        #expect(await eventually(timeout: .seconds(5)) { tunnel.waits.withLock { $0 } >= 1 })
        try await desktop.tunnel.send(Array(repeating: 0xEE, count: 48))  // never seen by the phone
        // The driver woke, found nothing, and waits again; it does not spin.
        #expect(await eventually(timeout: .seconds(5)) { tunnel.waits.withLock { $0 } >= 2 })
        try await Task.sleep(for: .milliseconds(200))
        #expect(tunnel.waits.withLock { $0 } == 2, "a wait for each arrival, not a loop")
        answer.continuation.finish()

        let response = try await desktop.response()
        let (signedIn, _) = try authentication.verify(response: response, knownCredentials: [account.credential])
        #expect(signedIn.signCount == 1)
        try await desktop.tunnel.send(try desktop.session.encryptShutdown())
        let result = await desktop.phone.result
        if case .failure(let error) = result { Issue.record("the phone failed: \(error)") }
    }

    @Test("a preliminary request the user lets time out (0x2F), then a sign-in answered in time: the sign-in decides, the phone's transaction succeeds")
    func laterAnswerClearsTheTimeout() async throws {
        let account = Account.make("erin")
        let phone = SimulatedPhone(passkeys: [account.passkey])
        var timeouts = SessionTimeouts.fast
        timeouts.userAction = .milliseconds(300)
        var desktop = try await HandDrivenDesktop.start(
            requestType: .getAssertion, getInfo: phone.getInfo, timeouts: timeouts
        ) { request in
            guard request.first == 0x0B else { return phone.respond(to: request, now: unixNow()) }
            // authenticatorSelection: a user who never touches the phone.
            let (never, _) = AsyncStream<Void>.makeStream()
            for await _ in never {}
            return [CTAP2StatusCode.operationDenied.rawValue]
        }
        #expect(try await desktop.receive().isEmpty)
        #expect(try await desktop.exchange([0x0B]) == [CTAP2StatusCode.userActionTimeout.rawValue])
        let authentication = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
        let response = try await desktop.exchange(authentication.requestBytes)
        let (signedIn, _) = try authentication.verify(response: response, knownCredentials: [account.credential])
        #expect(signedIn.signCount == 1)
        try await desktop.tunnel.send(try desktop.session.encryptShutdown())
        let result = await desktop.phone.result
        if case .failure(let error) = result { Issue.record("the earlier timeout decided the outcome: \(error)") }
    }

    /// Waits `delay` whatever happens to the task (a process that does not run, a save under way).
    static func uncancellableSleep(_ delay: Duration) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000))) {
                continuation.resume()
            }
        }
    }

    @Test("a responder that claimed its answer before the deadline (it is saving) has its answer sent even when the save outlasts the deadline; one that claims after the deadline is refused and the desktop gets 0x2F")
    func claimedAnswerBeatsTheDeadline() async throws {
        let account = Account.make("erin")
        let phone = SimulatedPhone(passkeys: [account.passkey])
        var timeouts = SessionTimeouts.fast
        timeouts.userAction = .milliseconds(300)
        for claimFirst in [true, false] {
            let granted = Mutex<Bool?>(nil)
            var desktop = try await HandDrivenDesktop.start(
                requestType: .getAssertion, getInfo: phone.getInfo, timeouts: timeouts
            ) { (request: [UInt8], claim: @escaping @Sendable () -> Bool) in
                if claimFirst {
                    granted.withLock { $0 = claim() }
                    await Self.uncancellableSleep(.milliseconds(800))  // a slow save, past the deadline
                } else {
                    await Self.uncancellableSleep(.milliseconds(800))  // frozen past the deadline
                    granted.withLock { $0 = claim() }
                    if granted.withLock({ $0 }) == false { return [CTAP2StatusCode.operationDenied.rawValue] }
                }
                return phone.respond(to: request, now: unixNow())
            }
            #expect(try await desktop.receive().isEmpty)
            let authentication = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
            let response = try await desktop.exchange(authentication.requestBytes)
            try await desktop.tunnel.send(try desktop.session.encryptShutdown())
            let result = await desktop.phone.result
            if claimFirst {
                #expect(granted.withLock { $0 } == true)
                let (signedIn, _) = try authentication.verify(response: response, knownCredentials: [account.credential])
                #expect(signedIn.signCount == 1)
                if case .failure(let error) = result { Issue.record("a claimed answer was discarded: \(error)") }
            } else {
                // The driver answered the timeout long before; the late claim is refused.
                #expect(response == [CTAP2StatusCode.userActionTimeout.rawValue])
                let deadline = ContinuousClock.now + .seconds(5)
                while granted.withLock({ $0 }) == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
                #expect(granted.withLock { $0 } == false)
                guard case .failure(let error as TransactionError) = result else {
                    Issue.record("the phone did not fail with the timeout: \(result)")
                    continue
                }
                #expect(error.step == "answering the request" && error.runtimeCode == .timeout)
            }
        }
    }

    @Test("a claimed answer that outlasts the deadline and the claimed grace too is discarded: the desktop gets 0x2F, the phone ends with the timeout")
    func claimedGraceRunsOut() async throws {
        let account = Account.make("erin")
        let phone = SimulatedPhone(passkeys: [account.passkey])
        var timeouts = SessionTimeouts.fast
        timeouts.userAction = .milliseconds(300)
        timeouts.claimedGrace = .milliseconds(300)
        let granted = Mutex<Bool?>(nil)
        var desktop = try await HandDrivenDesktop.start(
            requestType: .getAssertion, getInfo: phone.getInfo, timeouts: timeouts
        ) { (request: [UInt8], claim: @escaping @Sendable () -> Bool) in
            granted.withLock { $0 = claim() }
            await Self.uncancellableSleep(.seconds(3))  // a save that hangs past deadline + grace
            return phone.respond(to: request, now: unixNow())
        }
        #expect(try await desktop.receive().isEmpty)
        let started = ContinuousClock.now
        let authentication = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
        let response = try await desktop.exchange(authentication.requestBytes)
        let waited = ContinuousClock.now - started
        #expect(granted.withLock { $0 } == true)
        #expect(response == [CTAP2StatusCode.userActionTimeout.rawValue])
        // The claim bought the grace: not the bare deadline's 300 ms (the hung save's answer would
        // have been the signature, not 0x2F).
        #expect(waited >= .milliseconds(550), "\(waited)")
        try await desktop.tunnel.send(try desktop.session.encryptShutdown())
        guard case .failure(let error as TransactionError) = await desktop.phone.result else {
            Issue.record("the phone did not fail with the timeout")
            return
        }
        #expect(error.step == "answering the request" && error.runtimeCode == .timeout)
    }
}
