import CTAP2
import HybridCore
import HybridRuntime
import Testing

@Suite("Session drivers over an in-memory tunnel", .timeLimit(.minutes(1)))
struct SessionDriverInMemoryTests {
    @Test("makeCredential then getAssertion, each verified as the relying party")
    func registerThenSignIn() async throws {
        let phone = SimulatedPhone()
        let lab = InMemoryLab()
        let user = PublicKeyCredentialUserEntity(id: [0x01, 0x02, 0x03], name: "alice", displayName: "Alice")
        let registration = Ceremony.Registration(
            relyingParty: exampleRP, rpName: "Example", user: user, challenge: RandomSource.system.bytes(32))
        let made = try await lab.transact(request: registration.requestBytes, hint: .makeCredential, phone: phone)
        let credential = try registration.verify(response: made.outcome.response, now: unixNow()).credential
        #expect(credential.userId == user.id)
        #expect(credential.signCount == 0)
        #expect(phone.passkeys.map(\.credentialID) == [credential.credentialId])
        // The desktop got the phone's getInfo from the post-handshake message.
        #expect(made.outcome.getInfo == phone.getInfo)
        #expect(made.outcome.linking == nil)

        let authentication = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
        let got = try await lab.transact(request: authentication.requestBytes, hint: .getAssertion, phone: phone)
        let (signedIn, response) = try authentication.verify(response: got.outcome.response, knownCredentials: [credential])
        #expect(signedIn.credentialId == credential.credentialId)
        #expect(signedIn.signCount == 1)
        #expect(response.user?.id == user.id)
    }

    @Test("the paths agree on the tunnel ID and carry the assigned routing ID; events come in protocol order")
    func pathsAndEvents() async throws {
        let account = Account.make("carol")
        let phone = SimulatedPhone(passkeys: [account.passkey])
        let lab = InMemoryLab()
        let authentication = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
        let run = try await lab.transact(request: authentication.requestBytes, hint: .getAssertion, phone: phone)
        _ = try authentication.verify(response: run.outcome.response, knownCredentials: [account.credential])

        guard case .new(let tunnelID) = TunnelServicePath(parsing: run.newPath) else {
            Issue.record("the phone opened \(run.newPath), not a /cable/new path")
            return
        }
        #expect(TunnelServicePath(parsing: run.connectPath) == .connect(routingID: lab.routingID, tunnelID: tunnelID))
        #expect(
            run.desktopEvents.map(eventName) == [
                "waitingForAdvert", "advertAccepted", "tunnelJoined", "handshakeSent", "authenticatorReady",
                "requestSent", "responseReceived", "shutdownSent",
            ])
        #expect(
            run.phoneEvents.map(eventName) == [
                "tunnelCreated", "advertising", "handshakeAnswered", "requestReceived", "responseSent",
                "shutdownReceived",
            ])
        #expect(run.phoneEvents.first == .tunnelCreated(routingID: lab.routingID))
        #expect(run.desktopEvents.contains(.requestSent(
            command: 0x02, plaintextBytes: authentication.requestBytes.count,
            ciphertextBytes: Crypter.pad([0x01] + authentication.requestBytes).count + 16)))
    }

    @Test("the phone's end closing after the handshake ends the desktop with that close code, not a timeout")
    func phoneClosesAfterHandshake() async throws {
        let account = Account.make("dave")
        let phone = SimulatedPhone(passkeys: [account.passkey])
        var lab = InMemoryLab()
        // Message 2, the post-handshake message and the update message are the phone's first three
        // sends. A phone that is switched off reads nothing more, even a request already queued for it.
        lab.wrapPhoneTunnel = { tunnel in
            let off = LockedBox(false)
            return TunnelTap(
                tunnel,
                afterSend: { sent, inner in
                    guard sent == 3 else { return }
                    off.update { $0 = true }
                    await (inner as? InMemoryTunnel)?.close(code: .goingAway, reason: "phone switched off")
                },
                onReceive: { _, message in off.value ? nil : message })
        }
        let authentication = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
        let start = ContinuousClock.now
        do {
            _ = try await lab.transact(request: authentication.requestBytes, hint: .getAssertion, phone: phone)
            Issue.record("the transaction succeeded although the phone left")
        } catch let error as TransactionError {
            #expect(error.side == .desktop)
            #expect(["sending the request", "waiting for the phone's response"].contains(error.step))
            #expect(error.runtimeCode == .closed)
            #expect((error.underlying as? RuntimeError)?.closeCode == .goingAway)
        }
        // `.closed`, not `.timeout`, shows the close ended it; the clock only checks the budget.
        #expect(ContinuousClock.now - start < lab.timeouts.total)
        #expect(phone.outcomes.isEmpty)
    }

    @Test("a desktop that fails after the phone's response closes with 1011, so the phone reports a failure, not success")
    func desktopFailureReachesThePhone() async throws {
        let account = Account.make("frank")
        let phone = SimulatedPhone(passkeys: [account.passkey])
        var relay = HybridHarness.InMemoryRelay()
        // The desktop's fourth message from the phone is its response: flip a byte of it.
        relay.wrapDesktop = { tunnel in
            TunnelTap(tunnel, onReceive: { received, message in
                guard received == 4 else { return message }
                var tampered = message
                tampered[tampered.count / 2] ^= 0x01
                return tampered
            })
        }
        let authentication = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
        let results = try await HybridHarness.transactInMemoryBothSides(
            request: authentication.requestBytes, hint: .getAssertion, phone: phone, timeouts: .fast,
            phoneEvents: { _ in }, desktopEvents: { _ in }, relay: relay)

        #expect(throws: TransactionError.self) { try results.desktop.get() }
        // Before, the desktop closed with 1000 and the phone, which takes an orderly close after
        // its response for the end (Docs/PROTOCOL-TOLERANCE.md), reported success.
        do {
            try results.phone.get()
            Issue.record("the phone reported success although the desktop failed")
        } catch let error as TransactionError {
            #expect(error.side == .phone)
            let closed = error.underlying as? RuntimeError
            #expect(closed?.closeCode == .internalError)
            #expect(closed?.reason.hasPrefix(
                "tunnel closed with 1011 (internal error): the desktop ended the transaction after an error (") == true,
                "\(String(describing: closed))")
        }
        #expect(phone.outcomes.count == 1, "the phone did answer: the failure is the desktop's")
    }
}
