import CTAP2
import Crypto
import HybridCore
import HybridTestSupport
import Testing

/// `SymmetricState` (Noise §5.2 with caBLE's choices, PROTOCOL.md §5.1): each operation against an
/// independent computation with swift-crypto and against values from the QR transcript's trace.
@Suite struct SymmetricStateTests {
    static let knName = hex("4e6f6973655f4b4e70736b305f503235365f41455347434d5f53484132353600")

    static func sha256(_ parts: [UInt8]...) -> [UInt8] {
        var hasher = SHA256()
        for part in parts { hasher.update(data: part) }
        return Array(hasher.finalize())
    }

    static func hkdf(salt: [UInt8], ikm: [UInt8], count: Int) -> [UInt8] {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: ikm), salt: salt, info: [UInt8](), outputByteCount: count
        ).withUnsafeBytes { Array($0) }
    }

    /// The desktop's symmetric state of transcript_qr_flow after `MixKeyAndHash(psk)` (trace step 3).
    static func qrStateAfterPSK() throws -> SymmetricState {
        let t = try TranscriptQRInputs.load()
        var state = SymmetricState(protocolName: Self.knName)
        state.mixHash([0x01])
        state.mixHash(hex(t.inputs.desktop_identity_public_x962))
        state.mixKeyAndHash(hex(t.advert.psk_32))
        return state
    }

    @Test func initialState() {
        let state = SymmetricState(protocolName: Self.knName)
        #expect(state.handshakeHash == Self.knName)
        #expect(state.chainingKey == Self.knName)
        #expect(state.cipherKey == nil)
        #expect(state.nonce == 0)
    }

    @Test("MixHash: h = SHA-256(h ‖ data); transcript step 1")
    func mixHash() {
        var state = SymmetricState(protocolName: Self.knName)
        state.mixHash([0x01])
        #expect(state.handshakeHash == Self.sha256(Self.knName, [0x01]))
        #expect(Hex.encode(state.handshakeHash) == "2368ca317a7b06a2424e87c2705aea6823e02b9aff3755ee08a0bc3ad49e10ac")
        #expect(state.chainingKey == Self.knName)
        #expect(state.cipherKey == nil)
        let before = state.handshakeHash
        state.mixHash([])
        #expect(state.handshakeHash == Self.sha256(before))
    }

    @Test("MixKeyAndHash(psk): ck, temp_h, k = HKDF(ck, psk, 3); transcript step 3")
    func mixKeyAndHash() throws {
        let state = try Self.qrStateAfterPSK()
        #expect(Hex.encode(state.handshakeHash) == "86e2e93c13060edd24eebb1328d358f096183524afc42f6e64a99ba67acc2956")
        #expect(Hex.encode(state.chainingKey) == "1984f4ef7e7d55cf73ea9bec7f258ef91cf5620a847a6c1b80e6b82f536b0de1")
        #expect(state.cipherKey.map { Hex.encode($0) } == "dee92f300d2ef0ffdacb751c64a1bb9817627ed5d562efabfbd092743727cfc9")
        #expect(state.nonce == 0)

        // The same from first principles.
        let t = try TranscriptQRInputs.load()
        let h2 = Self.sha256(Self.sha256(Self.knName, [0x01]), hex(t.inputs.desktop_identity_public_x962))
        let out = Self.hkdf(salt: Self.knName, ikm: hex(t.advert.psk_32), count: 96)
        #expect(state.chainingKey == Array(out[0..<32]))
        #expect(state.handshakeHash == Self.sha256(h2, Array(out[32..<64])))
        #expect(state.cipherKey == Array(out[64..<96]))
    }

    @Test("MixKey: ck, k = HKDF(ck, ikm, 2), h unchanged, n reset; transcript step 5")
    func mixKey() throws {
        let t = try TranscriptQRInputs.load()
        var state = try Self.qrStateAfterPSK()
        let point = hex(t.inputs.desktop_ephemeral_public_x962)
        state.mixHash(point)
        _ = state.encryptAndHash([])  // advance n, to see MixKey reset it
        #expect(state.nonce == 1)
        var fresh = try Self.qrStateAfterPSK()
        fresh.mixHash(point)
        let ck = fresh.chainingKey
        let h = fresh.handshakeHash
        fresh.mixKey(point)
        #expect(Hex.encode(fresh.chainingKey) == "d51e2528203e190a675f776b9c269b569a85b43afef0291a43543611e5c2ac6f")
        #expect(fresh.cipherKey.map { Hex.encode($0) } == "ac2c8a3d0f43df6cbd0ab0d571d90386b59d4010efb891cc96ba0ca411f602a0")
        #expect(fresh.handshakeHash == h)
        let out = Self.hkdf(salt: ck, ikm: point, count: 64)
        #expect(fresh.chainingKey == Array(out[0..<32]))
        #expect(fresh.cipherKey == Array(out[32..<64]))
        state.mixKey(point)
        #expect(state.nonce == 0)
    }

    @Test("EncryptAndHash: AES-GCM(k, n, aad = h); transcript step 6")
    func encryptAndHash() throws {
        let t = try TranscriptQRInputs.load()
        var state = try Self.qrStateAfterPSK()
        let point = hex(t.inputs.desktop_ephemeral_public_x962)
        state.mixHash(point)
        state.mixKey(point)
        let h = state.handshakeHash
        let key = try #require(state.cipherKey)
        let tag = state.encryptAndHash([])
        #expect(Hex.encode(tag) == "977e94b49183344dcfb62b8ad30411bb")
        #expect(Hex.encode(state.handshakeHash) == "52f08da55acede89e62784c49664f08f1bc34712e655953e190d71644bb63c4b")
        #expect(state.handshakeHash == Self.sha256(h, tag))
        #expect(state.nonce == 1)
        #expect(Array(t.noise.msg1_desktop_to_phone.suffix(32)) == Array(Hex.encode(tag)))

        // Independent AES-GCM with the counter big-endian in the first four nonce bytes.
        let h1 = state.handshakeHash
        let payload = Array("payload".utf8)
        let second = state.encryptAndHash(payload)
        let sealed = try AES.GCM.seal(
            payload, using: SymmetricKey(data: key), nonce: AES.GCM.Nonce(data: [0, 0, 0, 1] + [UInt8](repeating: 0, count: 8)),
            authenticating: h1)
        #expect(second == Array(sealed.ciphertext) + Array(sealed.tag))
        #expect(state.nonce == 2)
    }

    @Test("DecryptAndHash agrees with EncryptAndHash on a twin state")
    func decryptAndHashAgreement() throws {
        var sender = try Self.qrStateAfterPSK()
        var receiver = try Self.qrStateAfterPSK()
        for payload in [[], Array("hello".utf8), [UInt8](repeating: 0xAA, count: 100)] {
            let ciphertext = sender.encryptAndHash(payload)
            #expect(ciphertext.count == payload.count + 16)
            #expect(try receiver.decryptAndHash(ciphertext) == payload)
            #expect(receiver.handshakeHash == sender.handshakeHash)
            #expect(receiver.nonce == sender.nonce)
        }
    }

    @Test("DecryptAndHash of a tampered or short ciphertext fails and changes nothing")
    func decryptAndHashTamper() throws {
        var sender = try Self.qrStateAfterPSK()
        let ciphertext = sender.encryptAndHash(Array("x".utf8))
        var receiver = try Self.qrStateAfterPSK()
        let h = receiver.handshakeHash
        let ck = receiver.chainingKey
        for index in ciphertext.indices {
            #expect(throws: HybridError(.handshakeFailed), "byte \(index)") {
                try receiver.decryptAndHash(flipping(ciphertext, at: index, mask: 0x80))
            }
        }
        for count in 0..<16 {
            #expect(throws: HybridError(.handshakeFailed), "length \(count)") {
                try receiver.decryptAndHash(Array(ciphertext.prefix(count)))
            }
        }
        #expect(receiver.handshakeHash == h)
        #expect(receiver.chainingKey == ck)
        #expect(receiver.nonce == 0)
        #expect(try receiver.decryptAndHash(ciphertext) == Array("x".utf8))
    }

    @Test("Split: k1, k2 = HKDF(ck, empty, 2)")
    func split() throws {
        let state = try Self.qrStateAfterPSK()
        let keys = state.split()
        let out = Self.hkdf(salt: state.chainingKey, ikm: [], count: 64)
        #expect(keys.initiatorToResponder == Array(out[0..<32]))
        #expect(keys.responderToInitiator == Array(out[32..<64]))
        #expect(keys.initiatorToResponder != keys.responderToInitiator)
    }

    @Test("the protocol names and prologues of the two patterns")
    func patterns() throws {
        #expect(NoiseHandshake.Pattern.knpsk0.protocolName == Self.knName)
        #expect(NoiseHandshake.Pattern.knpsk0.protocolName == hex(try TranscriptQRInputs.load().noise.protocol_name_32))
        #expect(NoiseHandshake.Pattern.nkpsk0.protocolName == hex(try LinkedTranscriptInputs.load().noise.protocol_name_32))
        #expect(NoiseHandshake.Pattern.nkpsk0.protocolName == Array("Noise_NKpsk0_P256_AESGCM_SHA256".utf8) + [0])
        #expect(NoiseHandshake.Pattern.knpsk0.prologue == 1)
        #expect(NoiseHandshake.Pattern.nkpsk0.prologue == 0)
    }
}
