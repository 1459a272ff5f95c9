import CTAP2
import HybridCore
import HybridRuntime
import Testing

/// End to end over real sockets: the relay on an ephemeral loopback port, WebSocket tunnels and
/// UDP adverts, through ``HybridHarness``.
@Suite("Hybrid harness over loopback", .timeLimit(.minutes(1)))
struct HarnessTests {
    @Test("register, then sign in twice: each assertion verifies and the counter goes up")
    func registerThenSignIn() async throws {
        try await withHarness { harness in
            let phone = SimulatedPhone()
            let events = LockedBox<[SessionEvent]>([])
            var options = HybridHarness.TransactionOptions()
            options.events = { event in events.update { $0.append(event) } }

            let registered = try await harness.register(
                on: phone, relyingParty: exampleRP, userName: "alice", options: options)
            #expect(registered.userName == "alice")
            #expect(registered.signCount == 0)
            #expect(phone.passkeys.count == 1)
            #expect(harness.relay.statistics.tunnelsJoined == 1)

            let first = try await harness.signIn(on: phone, relyingParty: exampleRP, knownCredentials: [registered])
            #expect(first.credentialId == registered.credentialId)
            #expect(first.signCount == 1)
            let second = try await harness.signIn(on: phone, relyingParty: exampleRP, knownCredentials: [first])
            #expect(second.signCount == 2)
            #expect(phone.passkeys.first?.signCount == 2)

            // Both sides reported progress through the one callback, over real sockets.
            let names = Set(events.value.map(eventName))
            #expect(names.isSuperset(of: ["advertAccepted", "tunnelJoined", "tunnelCreated", "shutdownReceived"]))
            let routingIDs = events.value.compactMap { event -> [UInt8]? in
                if case .tunnelCreated(let routingID) = event { return routingID }
                return nil
            }
            #expect(routingIDs.count == 1 && routingIDs.first?.count == 3)
            #expect(harness.relay.statistics.tunnelsOpened == 3)
            #expect(await eventually { harness.relay.openTunnelCount == 0 })
        }
    }

    @Test("verified is called once per verified response, before the call returns, and not for a refused one")
    func verifiedHook() async throws {
        try await withHarness { harness in
            let phone = SimulatedPhone()
            let calls = LockedBox(0)
            var options = HybridHarness.TransactionOptions()
            options.verified = { calls.update { $0 += 1 } }
            let registered = try await harness.register(
                on: phone, relyingParty: exampleRP, userName: "alice", options: options)
            #expect(calls.value == 1)
            let signedIn = try await harness.signIn(
                on: phone, relyingParty: exampleRP, knownCredentials: [registered], options: options)
            #expect(signedIn.signCount == 1)
            #expect(calls.value == 2)

            // A response the relying party refuses (a credential it does not know): no call, its
            // error once both sides finished, and the tunnel closed normally on both sides.
            await #expect(throws: RelyingPartyError.self) {
                try await harness.signIn(on: phone, relyingParty: exampleRP, knownCredentials: [], options: options)
            }
            #expect(calls.value == 2)
            #expect(await eventually { harness.relay.openTunnelCount == 0 })
            #expect(harness.relay.statistics.tunnelsClosed[WebSocketCloseCode.normalClosure.rawValue] == 3)
        }
    }

    @Test("sign-in with allowCredentials names the credential and signs with it")
    func allowCredentials() async throws {
        try await withHarness { harness in
            let alice = Account.make("alice")
            let bob = Account.make("bob")
            let phone = SimulatedPhone(passkeys: [alice.passkey, bob.passkey])

            let signedIn = try await harness.signIn(
                on: phone, relyingParty: exampleRP, knownCredentials: [alice.credential, bob.credential],
                allowCredentials: [bob.credential.credentialId])
            #expect(signedIn.credentialId == bob.credential.credentialId)
            #expect(signedIn.signCount == 1)
            // One candidate: the phone signed without asking the user to pick.
            guard case .signedIn(let passkey) = phone.outcomes.last else {
                Issue.record("the phone did not sign: \(phone.outcomes)")
                return
            }
            #expect(passkey.userName == "bob")
        }
    }

    @Test("a discoverable sign-in with two accounts signs with the one the user picks", arguments: ["alice", "bob"])
    func discoverableAccountSelection(pick: String) async throws {
        try await withHarness { harness in
            let phone = SimulatedPhone()
            let offered = LockedBox<[String]>([])
            phone.policy = SoftwareAuthenticator.Policy(selectAccount: { candidates in
                offered.update { $0 = candidates.compactMap(\.userName).sorted() }
                return candidates.first { $0.userName == pick }
            })
            let alice = try await harness.register(on: phone, relyingParty: exampleRP, userName: "alice")
            let bob = try await harness.register(on: phone, relyingParty: exampleRP, userName: "bob")

            let signedIn = try await harness.signIn(on: phone, relyingParty: exampleRP, knownCredentials: [alice, bob])
            #expect(offered.value == ["alice", "bob"])
            #expect(signedIn.userName == pick)
            #expect(signedIn.credentialId == (pick == "alice" ? alice : bob).credentialId)
            #expect(signedIn.signCount == 1)
        }
    }
}
