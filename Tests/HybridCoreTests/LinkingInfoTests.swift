import CTAP2
import Crypto
import HybridCore
import HybridTestSupport
import Testing

/// `LinkingInfo` against `linking_info_in_qr_flow` of `Vectors/transcript_linked_flow.json`:
/// the linking map, its handshake signature and Chromium's `Pairing::Parse` rules (PROTOCOL.md §8.3).
@Suite struct LinkingInfoTests {
    typealias Linking = LinkedTranscriptInputs.LinkingInQRFlow

    static func vector() throws -> Linking { try LinkedTranscriptInputs.load().linking_info_in_qr_flow }

    static func info(_ l: Linking) -> LinkingInfo {
        LinkingInfo(
            contactID: hex(l.contact_id), pairingID: hex(l.pairing_id_8), linkSecret: hex(l.paired_secret),
            authenticatorPublicKey: hex(l.phone_identity_public_x962), name: l.authenticator_name,
            handshakeSignature: hex(l.pairing_signature))
    }

    static func desktopIdentity() throws -> P256.KeyAgreement.PrivateKey {
        try p256PrivateKey(try TranscriptQRInputs.load().inputs.desktop_identity_private_scalar)
    }

    static func validMap() throws -> [CBORValue: CBORValue] {
        try #require(try CBOR.decode(hex(try Self.vector().linking_map_cbor)).mapValue)
    }

    // MARK: - Known answers

    @Test("the linking map encodes to linking_map_cbor and parses back")
    func linkingMap() throws {
        let l = try Self.vector()
        let info = Self.info(l)
        #expect(Hex.encode(CBOR.encode(info.cbor)) == l.linking_map_cbor)
        #expect(try LinkingInfo(cbor: CBOR.decode(hex(l.linking_map_cbor))) == info)
        #expect(info.fromNewImplementation == nil)
    }

    @Test("the handshake signature is HMAC(ECDH(phone identity, desktop QR identity), handshake hash)")
    func signature() throws {
        let l = try Self.vector()
        let t = try TranscriptQRInputs.load()
        #expect(l.handshake_hash == t.noise.handshake_hash)
        let phone = try p256PrivateKey(l.phone_identity_private_scalar)
        #expect(Array(phone.publicKey.x963Representation) == hex(l.phone_identity_public_x962))
        let desktop = try Self.desktopIdentity()
        #expect(Array(desktop.publicKey.x963Representation) == hex(t.inputs.desktop_identity_public_x962))

        let signature = LinkingInfo.handshakeSignature(
            authenticatorIdentity: phone, clientIdentity: desktop.publicKey, handshakeHash: hex(l.handshake_hash))
        #expect(Hex.encode(signature) == l.pairing_signature)

        // The key is the published ECDH x-coordinate.
        let shared = try phone.sharedSecretFromKeyAgreement(with: desktop.publicKey).withUnsafeBytes { Array($0) }
        #expect(Hex.encode(shared) == l.ecdh_phone_identity_x_desktop_qr_identity)
        let mac = HMAC<SHA256>.authenticationCode(for: hex(l.handshake_hash), using: SymmetricKey(data: shared))
        #expect(Array(mac) == signature)
    }

    @Test("the desktop verifies the signature with its QR identity key")
    func verifies() throws {
        let l = try Self.vector()
        try Self.info(l).verify(clientIdentity: try Self.desktopIdentity(), handshakeHash: hex(l.handshake_hash))
    }

    // MARK: - Verification failures

    @Test("a flipped signature byte fails verification", arguments: 0..<32)
    func flippedSignature(_ index: Int) throws {
        let l = try Self.vector()
        var info = Self.info(l)
        info.handshakeSignature = flipping(info.handshakeSignature, at: index, mask: 0x40)
        #expect(throws: HybridError(.invalidLinkingInfo)) {
            try info.verify(clientIdentity: try Self.desktopIdentity(), handshakeHash: hex(l.handshake_hash))
        }
    }

    @Test("another handshake hash fails verification")
    func otherHandshakeHash() throws {
        let l = try Self.vector()
        let info = Self.info(l)
        let desktop = try Self.desktopIdentity()
        for hash in [flipping(hex(l.handshake_hash), at: 31), hex(try LinkedTranscriptInputs.load().noise.handshake_hash), [], [UInt8](repeating: 0, count: 32)] {
            #expect(throws: HybridError(.invalidLinkingInfo)) { try info.verify(clientIdentity: desktop, handshakeHash: hash) }
        }
    }

    @Test("the wrong desktop key fails verification")
    func wrongKey() throws {
        let l = try Self.vector()
        let info = Self.info(l)
        #expect(throws: HybridError(.invalidLinkingInfo)) {
            try info.verify(clientIdentity: P256.KeyAgreement.PrivateKey(), handshakeHash: hex(l.handshake_hash))
        }
        // The phone's own key in the desktop's place does not verify either.
        #expect(throws: HybridError(.invalidLinkingInfo)) {
            try info.verify(clientIdentity: try p256PrivateKey(l.phone_identity_private_scalar), handshakeHash: hex(l.handshake_hash))
        }
    }

    @Test("a signature made for another phone key fails verification")
    func substitutedPublicKey() throws {
        let l = try Self.vector()
        var info = Self.info(l)
        info.authenticatorPublicKey = Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)
        #expect(throws: HybridError(.invalidLinkingInfo)) {
            try info.verify(clientIdentity: try Self.desktopIdentity(), handshakeHash: hex(l.handshake_hash))
        }
    }

    @Test("key 4 that is not a P-256 point fails verification", arguments: [1, 33, 64])
    func invalidPoint(_ index: Int) throws {
        let l = try Self.vector()
        var info = Self.info(l)
        info.authenticatorPublicKey = flipping(info.authenticatorPublicKey, at: index)
        #expect(throws: HybridError(.invalidLinkingInfo)) {
            try info.verify(clientIdentity: try Self.desktopIdentity(), handshakeHash: hex(l.handshake_hash))
        }
    }

    // MARK: - Parse rules

    @Test("keys 2, 3, 4 and 6 of the wrong size are rejected", arguments: [
        (2, 0), (2, 7), (2, 9), (2, 16),
        (3, 0), (3, 16), (3, 31), (3, 33),
        (4, 33), (4, 64), (4, 66),
        (6, 0), (6, 16), (6, 31), (6, 33),
    ])
    func wrongSizes(key: Int, size: Int) throws {
        var map = try Self.validMap()
        map[.int(key)] = .bytes([UInt8](repeating: 0x04, count: size))
        #expect(throws: HybridError(.invalidLinkingInfo)) { try LinkingInfo(cbor: .map(map)) }
    }

    @Test("each required key missing is rejected", arguments: 1...6)
    func missingKey(_ key: Int) throws {
        var map = try Self.validMap()
        map[.int(key)] = nil
        #expect(throws: HybridError(.invalidLinkingInfo)) { try LinkingInfo(cbor: .map(map)) }
    }

    @Test("keys of the wrong type are rejected", arguments: [
        (1, CBORValue.text("token")), (2, .int(8)), (3, .array([])), (4, .text("04")), (5, .bytes(Array("Phone".utf8))), (6, .null),
    ])
    func wrongTypes(key: Int, value: CBORValue) throws {
        var map = try Self.validMap()
        map[.int(key)] = value
        #expect(throws: HybridError(.invalidLinkingInfo)) { try LinkingInfo(cbor: .map(map)) }
    }

    @Test("a value that is not a map is rejected", arguments: [CBORValue.array([]), .bytes([0xa0]), .int(1), .null])
    func notAMap(_ value: CBORValue) {
        #expect(throws: HybridError(.invalidLinkingInfo)) { try LinkingInfo(cbor: value) }
    }

    @Test("contact IDs of any length, and key 999, are accepted")
    func lenientFields() throws {
        var map = try Self.validMap()
        for length in [0, 1, 200] {
            map[1] = .bytes([UInt8](repeating: 0xC0, count: length))
            #expect(try LinkingInfo(cbor: .map(map)).contactID.count == length)
        }
        map[999] = true
        let info = try LinkingInfo(cbor: .map(map))
        #expect(info.fromNewImplementation == true)
        #expect(info.cbor.mapValue?[999] == true)
        #expect(try LinkingInfo(cbor: info.cbor) == info)
        map[999] = "yes"  // not a bool: ignored
        #expect(try LinkingInfo(cbor: .map(map)).fromNewImplementation == nil)
        map[1000] = .bytes([1])  // unknown keys ignored
        _ = try LinkingInfo(cbor: .map(map))
    }

    @Test("a linking map built from random values round-trips and verifies")
    func randomRoundTrip() throws {
        let random = RandomSource.deterministic(seed: Array("LinkingInfoTests".utf8))
        for _ in 0..<10 {
            let phone = random.keyAgreementKey()
            let desktop = random.keyAgreementKey()
            let hash = random.bytes(32)
            let info = LinkingInfo(
                contactID: random.bytes(Int(random.bytes(1)[0])), pairingID: random.bytes(8), linkSecret: random.bytes(32),
                authenticatorPublicKey: Array(phone.publicKey.x963Representation), name: "phone",
                handshakeSignature: LinkingInfo.handshakeSignature(
                    authenticatorIdentity: phone, clientIdentity: desktop.publicKey, handshakeHash: hash))
            let parsed = try LinkingInfo(cbor: CBOR.decode(CBOR.encode(info.cbor)))
            #expect(parsed == info)
            try parsed.verify(clientIdentity: desktop, handshakeHash: hash)
        }
    }
}
