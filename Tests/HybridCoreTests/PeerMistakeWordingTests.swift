import CTAP2
@testable import HybridCore
import Testing

/// Mistakes an implementer of the other side makes, and words that point at them: each was once
/// reported in terms of a different rule (found by an independent implementation, 2026-11-26).
@Suite("Peer mistakes are named")
struct PeerMistakeWordingTests {
    private static let desktopKey = [UInt8](repeating: 0x11, count: 32)
    private static let phoneKey = [UInt8](repeating: 0x22, count: 32)

    /// What the desktop's channel says of `frame` sent by the phone after the post-handshake message.
    private static func desktopReceiving(_ frame: [UInt8]) throws -> String? {
        var phone = Crypter(readKey: desktopKey, writeKey: phoneKey)
        var channel = ClientChannel(crypter: Crypter(readKey: phoneKey, writeKey: desktopKey))
        _ = try channel.encryptRequest([0x02, 0xA0])
        do {
            _ = try channel.received(try phone.encrypt(frame))
            return nil
        } catch {
            return error.reason
        }
    }

    @Test("a response without its type byte is named as such, not as the phone sending a shutdown; a bare 00 still is one")
    func responseWithoutTypeByte() throws {
        #expect(
            try Self.desktopReceiving([0x00, 0xA1, 0x01, 0x02])
                == "the authenticator sent a message of type 0 (shutdown, which only clients send, and bare) with 3 more bytes: "
                + "is its type byte (01 for a CTAP response) missing?")
        #expect(try Self.desktopReceiving([0x00]) == "the authenticator sent a shutdown message (only clients do)")
        #expect(try Self.desktopReceiving([0x01, 0x00, 0xA0]) == nil)
    }

    @Test("a transport message of 81 bytes that does not decrypt is named as a handshake message sent again; other sizes are not")
    func handshakeSentAgain() {
        var crypter = Crypter(readKey: Self.desktopKey, writeKey: Self.phoneKey)
        for (size, hint) in [(81, true), (80, false), (112, false)] {
            do {
                _ = try crypter.decrypt([UInt8](repeating: 0x04, count: size))
                Issue.record("\(size) bytes of 0x04 decrypted")
            } catch {
                #expect(error.code == .decryptionFailed)
                #expect(error.reason.hasPrefix("message 0 does not authenticate (tampered, reordered or wrong key)"), "\(error.reason)")
                #expect(error.reason.hasSuffix("the size of a handshake message: was one sent again?") == hint, "\(size): \(error.reason)")
            }
        }
    }

    @Test("a request without its command byte: the phone names the CBOR map header it read as a command, once")
    func requestWithoutCommandByte() {
        var authenticator = SoftwareAuthenticator(random: .deterministic(seed: Array("wording".utf8)))
        let (_, outcome) = authenticator.handle([0xA1, 0x01, 0x02], policy: .init(), now: 0)
        guard case .refused(let status, let reason) = outcome else {
            Issue.record("answered: \(outcome)")
            return
        }
        #expect(status == .invalidCommand)
        #expect(reason == "command 0xa1 is not supported over hybrid (it is a CBOR map header: is the command byte missing?)")
        let (_, other) = authenticator.handle([0x42], policy: .init(), now: 0)
        guard case .refused(_, let plain) = other else {
            Issue.record("answered: \(other)")
            return
        }
        #expect(plain == "command 0x42 is not supported over hybrid")
    }

    @Test("authenticator data with bytes after signCount and neither AT nor ED names both flags")
    func bytesWithoutFlags() {
        let bytes = [UInt8](repeating: 0x5A, count: 32) + [0x05] + [0, 0, 0, 1] + [UInt8](repeating: 0, count: 5)
        #expect {
            try AuthenticatorData(bytes: bytes)
        } throws: { error in
            (error as? CTAP2Error)?.code == .trailingBytes
                && (error as? CTAP2Error)?.reason
                    == "authenticator data: 5 bytes after signCount with both AT and ED clear (attested credential data needs the AT flag, extensions the ED flag)"
        }
    }
}

extension PeerMistakeWordingTests {
    /// Chromium reads the new credential's COSE key with its canonical CBOR reader; a key whose map
    /// keys are out of order fails the registration in a browser, so the desktop fails it too.
    @Test("an excluded credential is named with its own account, which need not be the one being registered")
    func excludedCredentialNamesItsOwner() throws {
        let relyingParty = RelyingParty(id: "example.com", origin: "https://example.com")
        var authenticator = SoftwareAuthenticator(random: .deterministic(seed: Array("excluded".utf8)))
        let first = Ceremony.Registration(
            relyingParty: relyingParty, rpName: "Example",
            user: PublicKeyCredentialUserEntity(id: [1], name: "dev1", displayName: "Dev"), challenge: [UInt8](repeating: 1, count: 32))
        let (bytes, _) = authenticator.handle(first.requestBytes, policy: .init(), now: 0)
        let (credential, _) = try first.verify(response: bytes, now: 0)
        let second = Ceremony.Registration(
            relyingParty: relyingParty, rpName: "Example",
            user: PublicKeyCredentialUserEntity(id: [2], name: "newguy", displayName: "New"), challenge: [UInt8](repeating: 2, count: 32),
            excludeCredentials: [credential.credentialId])
        let (_, outcome) = authenticator.handle(second.requestBytes, policy: .init(), now: 0)
        #expect(outcome == .refused(.credentialExcluded, reason: "this phone already holds a passkey the relying party excluded (dev1): one credential per authenticator"))
    }

    @Test("a registration whose COSE key is not canonical (keys out of order) is malformed for the desktop; the canonical one verifies")
    func unsortedCOSEKey() throws {
        let registration = Ceremony.Registration(
            relyingParty: RelyingParty(id: "example.com", origin: "https://example.com"), rpName: "Example",
            user: PublicKeyCredentialUserEntity(id: [1, 2, 3], name: "alice", displayName: "Alice"), challenge: [UInt8](repeating: 9, count: 32))
        var authenticator = SoftwareAuthenticator(random: .deterministic(seed: Array("cose order".utf8)))
        let (bytes, _) = authenticator.handle(registration.requestBytes, policy: .init(), now: 0)
        _ = try registration.verify(response: bytes, now: 0)

        let response = try MakeCredentialResponse(bytes: Array(bytes.dropFirst()))
        let key = try #require(response.authData.attestedCredentialData?.credentialPublicKey)
        // Canonical: A5 01 02 03 26 20 01 21 … 22 …; the same entries with 3 (alg) before 1 (kty).
        #expect(Array(key.prefix(5)) == [0xA5, 0x01, 0x02, 0x03, 0x26])
        let unsorted = [0xA5, 0x03, 0x26, 0x01, 0x02] + key.dropFirst(5)
        let authData = response.authData.bytes
        let start = authData.count - key.count
        #expect(Array(authData[start...]) == key, "the key ends the authenticator data (no extensions)")
        var map = try #require(CBOR.decode(Array(bytes.dropFirst())).mapValue)
        map[2] = .bytes(Array(authData[..<start]) + unsorted)
        let tampered = [0x00] + CBOR.encode(.map(map))
        #expect {
            try registration.verify(response: tampered, now: 0)
        } throws: { error in
            guard let failure = error as? Ceremony.Failure else { return false }
            return failure.code == .malformedResponse
                && failure.reason.hasPrefix("the phone's makeCredential response is malformed: the credential public key in its authenticator data is not CTAP2 canonical CBOR (")
                && failure.reason.hasSuffix("a browser reads it strictly (Chromium's CBOR reader) and would fail this registration")
        }
    }

    @Test("a handshake message longer than 81 bytes that does not authenticate says how long it is and how long it should be")
    func handshakeMessageTooLong() throws {
        var desktop = ClientSession(requestType: .getAssertion, timestamp: 1_700_000_000)
        var phone = try AuthenticatorSession(qr: QRPayload(url: desktop.url), getInfo: [0xA0])
        guard case .matched = desktop.receivedAdvert(try phone.tunnelCreated(routingID: [1, 2, 3])) else {
            Issue.record("the desktop did not match the phone's advert")
            return
        }
        let message = desktop.tunnelConnected()
        #expect(message.count == 81)
        for (extra, hint) in [(16, true), (0, false)] {
            var copy = phone
            var tampered = message + [UInt8](repeating: 0x5A, count: extra)
            if extra == 0 { tampered[70] ^= 0x01 }
            do {
                _ = try copy.receivedMessage(tampered)
                Issue.record("a tampered handshake message was accepted")
            } catch {
                #expect(error.code == .handshakeFailed)
                #expect(error.reason.hasPrefix("handshake message does not authenticate"), "\(error.reason)")
                #expect(error.reason.hasSuffix("it is 97 bytes, where a handshake message with the empty payload hybrid uses is 81") == hint, "\(error.reason)")
            }
        }
    }
}
