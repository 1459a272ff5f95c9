import CTAP2
import Crypto
import HybridCore
import HybridTestSupport
import Testing

/// `NoiseHandshake` (KNpsk0 for the QR flow, NKpsk0 for the linked flow, PROTOCOL.md §5):
/// known answers from the transcripts, agreement with random keys, and tampering.
@Suite struct NoiseHandshakeTests {
    // MARK: - Known answers

    @Test("KNpsk0 reproduces transcript_qr_flow's messages, hash and traffic keys")
    func qrKnownAnswer() throws {
        let t = try TranscriptQRInputs.load()
        let desktopIdentity = try p256PrivateKey(t.inputs.desktop_identity_private_scalar)
        let psk = hex(t.advert.psk_32)
        let initiator = NoiseHandshake.Initiator.qr(
            psk: psk, identityKey: desktopIdentity,
            ephemeralKey: try p256PrivateKey(t.inputs.desktop_ephemeral_private_scalar))
        #expect(Hex.encode(initiator.message) == t.noise.msg1_desktop_to_phone)

        // The phone knows the desktop's key from the QR code: decompress key 0.
        let qrKey = try QRPayload(url: t.qr.url).publicKey
        #expect(Array(qrKey.x963Representation) == hex(t.inputs.desktop_identity_public_x962))
        var (phone, response) = try NoiseHandshake.respondQR(
            to: initiator.message, psk: psk, peerIdentity: qrKey,
            ephemeralKey: try p256PrivateKey(t.inputs.phone_ephemeral_private_scalar))
        #expect(Hex.encode(response) == t.noise.msg2_phone_to_desktop)
        #expect(Hex.encode(phone.handshakeHash) == t.noise.handshake_hash)

        var desktop = try initiator.finish(response: response)
        #expect(Hex.encode(desktop.handshakeHash) == t.noise.handshake_hash)

        // Keys: the phone writes with k2 (its post-handshake message is the transcript's ciphertext),
        // the desktop writes with k1 (a crypter reading k1 opens it).
        let postHandshake = t.post_handshake.messages[0]
        #expect(Hex.encode(try phone.crypter.encrypt(hex(postHandshake.plaintext))) == postHandshake.ciphertext)
        #expect(Hex.encode(try desktop.crypter.decrypt(hex(postHandshake.ciphertext))) == postHandshake.plaintext)
        var k1Reader = Crypter(readKey: hex(t.noise.k1_desktop_write_phone_read), writeKey: hex(t.noise.k2_phone_write_desktop_read))
        #expect(try k1Reader.decrypt(try desktop.crypter.encrypt([0])) == [0])
    }

    @Test("NKpsk0 reproduces transcript_linked_flow's messages, hash and traffic keys")
    func linkedKnownAnswer() throws {
        let t = try LinkedTranscriptInputs.load()
        let phoneIdentity = try p256PrivateKey(t.inputs.phone_identity_private_scalar)
        #expect(Array(phoneIdentity.publicKey.x963Representation) == hex(t.inputs.phone_identity_public_x962))
        let psk = hex(t.derived.psk)
        let initiator = NoiseHandshake.Initiator.linked(
            psk: psk, peerIdentity: phoneIdentity.publicKey,
            ephemeralKey: try p256PrivateKey(t.inputs.desktop_ephemeral_private_scalar))
        #expect(Hex.encode(initiator.message) == t.noise.msg1_desktop_to_phone)

        var (phone, response) = try NoiseHandshake.respondLinked(
            to: initiator.message, psk: psk, identityKey: phoneIdentity,
            ephemeralKey: try p256PrivateKey(t.inputs.phone_ephemeral_private_scalar))
        #expect(Hex.encode(response) == t.noise.msg2_phone_to_desktop)
        #expect(Hex.encode(phone.handshakeHash) == t.noise.handshake_hash)
        var desktop = try initiator.finish(response: response)
        #expect(Hex.encode(desktop.handshakeHash) == t.noise.handshake_hash)

        let postHandshake = t.post_handshake.messages[0]
        #expect(Hex.encode(try phone.crypter.encrypt(hex(postHandshake.plaintext))) == postHandshake.ciphertext)
        #expect(Hex.encode(try desktop.crypter.decrypt(hex(postHandshake.ciphertext))) == postHandshake.plaintext)
        var k1Reader = Crypter(readKey: hex(t.noise.k1_desktop_write_phone_read), writeKey: hex(t.noise.k2_phone_write_desktop_read))
        #expect(try k1Reader.decrypt(try desktop.crypter.encrypt([1, 2, 3])) == [1, 2, 3])
    }

    // MARK: - Agreement

    enum Flow: String, CaseIterable, Sendable { case qr, linked }

    /// A complete handshake with fresh keys from `random`: (desktop result, phone result, msg1, msg2).
    static func handshake(
        _ flow: Flow, random: RandomSource
    ) throws -> (desktop: NoiseHandshake.Result, phone: NoiseHandshake.Result, msg1: [UInt8], msg2: [UInt8]) {
        let psk = random.bytes(32)
        let staticKey = random.keyAgreementKey()
        switch flow {
        case .qr:
            let initiator = NoiseHandshake.Initiator.qr(psk: psk, identityKey: staticKey, ephemeralKey: random.keyAgreementKey())
            let (phone, response) = try NoiseHandshake.respondQR(
                to: initiator.message, psk: psk, peerIdentity: staticKey.publicKey, ephemeralKey: random.keyAgreementKey())
            return (try initiator.finish(response: response), phone, initiator.message, response)
        case .linked:
            let initiator = NoiseHandshake.Initiator.linked(
                psk: psk, peerIdentity: staticKey.publicKey, ephemeralKey: random.keyAgreementKey())
            let (phone, response) = try NoiseHandshake.respondLinked(
                to: initiator.message, psk: psk, identityKey: staticKey, ephemeralKey: random.keyAgreementKey())
            return (try initiator.finish(response: response), phone, initiator.message, response)
        }
    }

    @Test("random handshakes agree on the hash and on both traffic directions", arguments: Flow.allCases)
    func agreement(_ flow: Flow) throws {
        let random = RandomSource.deterministic(seed: Array("NoiseHandshakeTests.agreement.\(flow)".utf8))
        var hashes = Set<[UInt8]>()
        for run in 0..<8 {
            var (desktop, phone, msg1, msg2) = try Self.handshake(flow, random: random)
            #expect(msg1.count == HybridConstants.handshakeMessageSize)
            #expect(msg2.count == HybridConstants.handshakeMessageSize)
            #expect(msg1.first == 0x04 && msg2.first == 0x04)
            #expect(desktop.handshakeHash == phone.handshakeHash, "run \(run)")
            #expect(desktop.handshakeHash.count == 32)
            hashes.insert(desktop.handshakeHash)
            for index in 0..<25 {
                let up = random.bytes(index * 7)
                let down = random.bytes(index * 11 + 1)
                #expect(try phone.crypter.decrypt(try desktop.crypter.encrypt(up)) == up)
                #expect(try desktop.crypter.decrypt(try phone.crypter.encrypt(down)) == down)
            }
            #expect(desktop.crypter.writeSequence == 25 && desktop.crypter.readSequence == 25)
            #expect(phone.crypter.writeSequence == 25 && phone.crypter.readSequence == 25)
            // A side cannot read its own messages: the directions use different keys.
            var twin = desktop.crypter
            #expect(throws: HybridError(.decryptionFailed)) { try twin.decrypt(try desktop.crypter.encrypt([1])) }
        }
        #expect(hashes.count == 8)
    }

    @Test("finish can be retried: a failed response leaves the initiator usable", arguments: Flow.allCases)
    func initiatorIsReusable(_ flow: Flow) throws {
        let random = RandomSource.deterministic(seed: Array("reusable.\(flow)".utf8))
        let psk = random.bytes(32)
        let identity = random.keyAgreementKey()
        let phoneEphemeral = random.keyAgreementKey()
        let initiator = flow == .qr
            ? NoiseHandshake.Initiator.qr(psk: psk, identityKey: identity, ephemeralKey: random.keyAgreementKey())
            : NoiseHandshake.Initiator.linked(psk: psk, peerIdentity: identity.publicKey, ephemeralKey: random.keyAgreementKey())
        let (phone, response) = flow == .qr
            ? try NoiseHandshake.respondQR(to: initiator.message, psk: psk, peerIdentity: identity.publicKey, ephemeralKey: phoneEphemeral)
            : try NoiseHandshake.respondLinked(to: initiator.message, psk: psk, identityKey: identity, ephemeralKey: phoneEphemeral)
        #expect(throws: HybridError(.handshakeFailed)) { try initiator.finish(response: flipping(response, at: 80)) }
        #expect(try initiator.finish(response: response).handshakeHash == phone.handshakeHash)
    }

    // MARK: - Tamper

    /// A fixed QR-flow handshake for the tamper tests.
    struct QRFixture {
        let psk: [UInt8]
        let identity: P256.KeyAgreement.PrivateKey
        let phoneEphemeral: P256.KeyAgreement.PrivateKey
        let initiator: NoiseHandshake.Initiator
        let response: [UInt8]

        init() throws {
            let t = try TranscriptQRInputs.load()
            psk = hex(t.advert.psk_32)
            identity = try p256PrivateKey(t.inputs.desktop_identity_private_scalar)
            phoneEphemeral = try p256PrivateKey(t.inputs.phone_ephemeral_private_scalar)
            initiator = .qr(psk: psk, identityKey: identity, ephemeralKey: try p256PrivateKey(t.inputs.desktop_ephemeral_private_scalar))
            response = try NoiseHandshake.respondQR(
                to: initiator.message, psk: psk, peerIdentity: identity.publicKey, ephemeralKey: phoneEphemeral
            ).response
        }

        func respond(_ message: [UInt8], psk: [UInt8]? = nil, peer: P256.KeyAgreement.PublicKey? = nil) throws(HybridError) {
            _ = try NoiseHandshake.respondQR(
                to: message, psk: psk ?? self.psk, peerIdentity: peer ?? identity.publicKey, ephemeralKey: phoneEphemeral)
        }
    }

    @Test("msg1: flipping any byte of the point or the tag fails the handshake")
    func msg1ByteFlips() throws {
        let f = try QRFixture()
        try f.respond(f.initiator.message)  // the untouched message is fine
        for index in 0..<HybridConstants.handshakeMessageSize {
            for mask: UInt8 in [0x01, 0x80] {
                #expect(throws: HybridError(.handshakeFailed), "byte \(index) mask \(mask)") {
                    try f.respond(flipping(f.initiator.message, at: index, mask: mask))
                }
            }
        }
    }

    @Test("msg2: flipping any byte of the point or the tag fails the handshake")
    func msg2ByteFlips() throws {
        let f = try QRFixture()
        _ = try f.initiator.finish(response: f.response)
        for index in 0..<HybridConstants.handshakeMessageSize {
            for mask: UInt8 in [0x01, 0x80] {
                #expect(throws: HybridError(.handshakeFailed), "byte \(index) mask \(mask)") {
                    try f.initiator.finish(response: flipping(f.response, at: index, mask: mask))
                }
            }
        }
    }

    @Test("a valid point that is not the sender's ephemeral key fails the tag check")
    func substitutedPoint() throws {
        let f = try QRFixture()
        let other = Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)
        #expect(throws: HybridError(.handshakeFailed)) { try f.respond(other + f.initiator.message.suffix(16)) }
        #expect(throws: HybridError(.handshakeFailed)) { try f.initiator.finish(response: other + f.response.suffix(16)) }
        // The identity point itself (a valid key the attacker knows).
        let identityPoint = Array(f.identity.publicKey.x963Representation)
        #expect(throws: HybridError(.handshakeFailed)) { try f.respond(identityPoint + f.initiator.message.suffix(16)) }
    }

    @Test("a compressed or hybrid-encoded point is refused")
    func pointEncodings() throws {
        let f = try QRFixture()
        let compressed = Array(P256.KeyAgreement.PrivateKey().publicKey.compressedRepresentation)
        let padded = compressed + [UInt8](repeating: 0, count: 32) + Array(f.initiator.message.suffix(16))
        #expect(padded.count == 81)
        #expect(throws: HybridError(.handshakeFailed)) { try f.respond(padded) }
        for prefix: UInt8 in [0x00, 0x02, 0x03, 0x05, 0x06, 0x07] {
            var message = f.initiator.message
            message[0] = prefix
            #expect(throws: HybridError(.handshakeFailed), "prefix \(prefix)") { try f.respond(message) }
        }
    }

    @Test("msg1 of the wrong length fails", arguments: [0, 1, 33, 64, 65, 66, 80, 82, 97, 200])
    func msg1Lengths(_ count: Int) throws {
        let f = try QRFixture()
        let message = count <= 81
            ? Array(f.initiator.message.prefix(count))
            : f.initiator.message + [UInt8](repeating: 0, count: count - 81)
        #expect(throws: HybridError(.handshakeFailed)) { try f.respond(message) }
    }

    /// Chromium requires the response to be exactly 81 bytes (`kResponseSize`).
    @Test("msg2 of any length but 81 fails", arguments: [0, 64, 65, 80, 82, 97, 162])
    func msg2Lengths(_ count: Int) throws {
        let f = try QRFixture()
        let response = count <= 81 ? Array(f.response.prefix(count)) : f.response + [UInt8](repeating: 0, count: count - 81)
        #expect(throws: HybridError(.handshakeFailed)) { try f.initiator.finish(response: response) }
    }

    @Test("a wrong PSK fails on either side")
    func wrongPSK() throws {
        let f = try QRFixture()
        for index in [0, 15, 31] {
            #expect(throws: HybridError(.handshakeFailed)) { try f.respond(f.initiator.message, psk: flipping(f.psk, at: index)) }
        }
        // A desktop that derived another PSK (e.g. from another advert) rejects the phone's answer.
        let t = try TranscriptQRInputs.load()
        let otherDesktop = NoiseHandshake.Initiator.qr(
            psk: flipping(f.psk, at: 0), identityKey: f.identity,
            ephemeralKey: try p256PrivateKey(t.inputs.desktop_ephemeral_private_scalar))
        #expect(throws: HybridError(.handshakeFailed)) { try otherDesktop.finish(response: f.response) }
    }

    @Test("a wrong static key fails (KN: the QR key; NK: the phone identity)")
    func wrongStaticKey() throws {
        let f = try QRFixture()
        let stranger = P256.KeyAgreement.PrivateKey()
        #expect(throws: HybridError(.handshakeFailed)) { try f.respond(f.initiator.message, peer: stranger.publicKey) }

        let random = RandomSource.deterministic(seed: Array("wrongStaticKey".utf8))
        let psk = random.bytes(32)
        let phoneIdentity = random.keyAgreementKey()
        // Desktop holds a stale identity for the phone.
        let stale = NoiseHandshake.Initiator.linked(psk: psk, peerIdentity: stranger.publicKey, ephemeralKey: random.keyAgreementKey())
        #expect(throws: HybridError(.handshakeFailed)) {
            try NoiseHandshake.respondLinked(to: stale.message, psk: psk, identityKey: phoneIdentity, ephemeralKey: random.keyAgreementKey())
        }
        // Another phone (without the identity key) cannot answer.
        let honest = NoiseHandshake.Initiator.linked(psk: psk, peerIdentity: phoneIdentity.publicKey, ephemeralKey: random.keyAgreementKey())
        #expect(throws: HybridError(.handshakeFailed)) {
            try NoiseHandshake.respondLinked(to: honest.message, psk: psk, identityKey: stranger, ephemeralKey: random.keyAgreementKey())
        }
    }

    @Test("a response made for another handshake fails")
    func responseForAnotherHandshake() throws {
        let f = try QRFixture()
        let other = NoiseHandshake.Initiator.qr(psk: f.psk, identityKey: f.identity, ephemeralKey: P256.KeyAgreement.PrivateKey())
        #expect(throws: HybridError(.handshakeFailed)) { try other.finish(response: f.response) }
    }

    @Test("a message of one pattern is refused by the other")
    func crossPattern() throws {
        let random = RandomSource.deterministic(seed: Array("crossPattern".utf8))
        let psk = random.bytes(32)
        let key = random.keyAgreementKey()
        let kn = NoiseHandshake.Initiator.qr(psk: psk, identityKey: key, ephemeralKey: random.keyAgreementKey())
        let nk = NoiseHandshake.Initiator.linked(psk: psk, peerIdentity: key.publicKey, ephemeralKey: random.keyAgreementKey())
        #expect(throws: HybridError(.handshakeFailed)) {
            try NoiseHandshake.respondLinked(to: kn.message, psk: psk, identityKey: key, ephemeralKey: random.keyAgreementKey())
        }
        #expect(throws: HybridError(.handshakeFailed)) {
            try NoiseHandshake.respondQR(to: nk.message, psk: psk, peerIdentity: key.publicKey, ephemeralKey: random.keyAgreementKey())
        }
    }
}
