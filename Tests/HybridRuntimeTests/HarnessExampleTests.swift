import CTAP2
import HybridCore
import HybridRuntime
import Testing

@Suite("Passkeys over the hybrid transport")
struct HarnessExampleTests {
    @Test("register a passkey from a phone, then sign in with it")
    func registerThenSignIn() async throws {
        // A tunnel relay on an ephemeral loopback port; desktops and phones talk to it over real sockets.
        let harness = try await HybridHarness.start()
        let phone = SimulatedPhone()
        let rp = RelyingParty(id: "example.com", origin: "https://example.com")

        // makeCredential over QR, advert, tunnel and Noise handshake; verified as the relying party.
        let registered = try await harness.register(on: phone, relyingParty: rp, userName: "alice")
        #expect(phone.passkeys.count == 1)

        // getAssertion the same way; the assertion is checked against the registered public key.
        let signedIn = try await harness.signIn(on: phone, relyingParty: rp, knownCredentials: [registered])
        #expect(signedIn.credentialId == registered.credentialId)
        #expect(signedIn.signCount == registered.signCount + 1)

        // The simulated user can refuse: the phone answers CTAP2_ERR_OPERATION_DENIED.
        phone.policy = SoftwareAuthenticator.Policy(deny: true)
        let refusal = await #expect(throws: Ceremony.Failure.self) {
            try await harness.signIn(on: phone, relyingParty: rp, knownCredentials: [signedIn])
        }
        #expect(refusal?.status == .operationDenied)

        await harness.shutdown()
    }
}
