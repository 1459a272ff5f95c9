import CTAP2
import HybridCore
import HybridRuntime
import Testing

/// QR linking with no socket (``HybridHarness/registerAndLinkInMemory(on:relyingParty:userName:timeouts:)``):
/// the link a registration brings back is the phone's, verified as the desktop verifies it, and
/// signs in through the in-memory linked path and through a real relay alike.
@Suite("In-memory harness: QR linking without sockets")
struct InMemoryLinkingTests {
    private let relyingParty = RelyingParty(id: "memory.example", origin: "https://memory.example")

    @Test("a registration that links brings back the phone's link; two linked sign-ins in memory count up")
    func registerAndLinkThenSignIn() async throws {
        let phone = LinkedPhone(name: "Memory Pixel")
        let (registered, link) = try await HybridHarness.registerAndLinkInMemory(
            on: phone, relyingParty: relyingParty, userName: "mem")
        #expect(link.name == "Memory Pixel")
        #expect(link.contactID == phone.contactID)
        #expect(link.authenticatorPublicKey == phone.identityPublicKey)
        var credential = registered
        for expected in 1...2 {
            credential = try await HybridHarness.signInLinkedInMemory(
                on: phone, link: link, relyingParty: relyingParty, knownCredentials: [credential])
            #expect(credential.signCount == registered.signCount + UInt32(expected))
        }
    }

    @Test("the QR code says whether the desktop links (QR key 4): without a linking identity the phone sends no link")
    func linkingFollowsTheQRCode() async throws {
        let phone = LinkedPhone()
        let ceremony = Ceremony.Authentication(relyingParty: relyingParty, challenge: Array(repeating: 5, count: 32))
        _ = try await HybridHarness.registerInMemory(on: phone.phone, relyingParty: relyingParty, userName: "plain")
        let plain = try await HybridHarness.transactInMemory(request: ceremony.requestBytes, hint: .getAssertion, phone: phone.phone)
        #expect(plain.linking == nil, "a transaction without linking brought back a link")
        let linked = try await HybridHarness.transactInMemory(
            request: ceremony.requestBytes, hint: .getAssertion, phone: phone.phone, linking: phone.linkingIdentityForQR())
        #expect(linked.linking?.contactID == phone.contactID, "a sign-in that links brought back no link or another one")
    }

    @Test("a link made in memory signs in over loopback too, through a real relay's contact path")
    func inMemoryLinkWorksOverLoopback() async throws {
        let phone = LinkedPhone()
        let (registered, link) = try await HybridHarness.registerAndLinkInMemory(
            on: phone, relyingParty: relyingParty, userName: "both")
        let harness = try await HybridHarness.start()
        do {
            let signedIn = try await harness.signInLinked(on: phone, link: link, relyingParty: relyingParty, knownCredentials: [registered])
            #expect(signedIn.signCount == registered.signCount + 1)
        } catch {
            await harness.shutdown()
            throw error
        }
        await harness.shutdown()
    }

    @Test("a bit flipped in the phone's update message (the link) on the desktop's end: no link is accepted")
    func tamperedLinkRefused() async throws {
        let phone = LinkedPhone()
        let user = PublicKeyCredentialUserEntity(id: [9, 9], name: "tamper", displayName: "Tamper")
        let ceremony = Ceremony.Registration(relyingParty: relyingParty, rpName: nil, user: user, challenge: Array(repeating: 6, count: 32))
        let error = await #expect(throws: TransactionError.self) {
            _ = try await HybridHarness.transactInMemory(
                request: ceremony.requestBytes, hint: .makeCredential, phone: phone.phone,
                wrapDesktop: { end in
                    TunnelTap(
                        end,
                        onReceive: { received, message in
                            // 1 handshake answer, 2 post-handshake message, 3 update (the link), 4 response.
                            guard received == 3 else { return message }
                            var flipped = message
                            flipped[flipped.count / 2] ^= 0x01
                            return flipped
                        })
                },
                linking: phone.linkingIdentityForQR())
        }
        #expect(error?.side == .desktop, "\(String(describing: error))")
        #expect(error?.hybridCode == .decryptionFailed, "\(String(describing: error))")
    }
}
