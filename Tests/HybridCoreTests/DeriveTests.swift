import CTAP2
import Crypto
import HybridCore
import HybridTestSupport
import Testing

/// `derive`, `QRSecretKeys` and `derivePSK` against `Vectors/kdf.json`, `eid.json` and the
/// transcripts (PROTOCOL.md §2).
@Suite struct DeriveTests {
    struct Vector: Decodable, Sendable, CustomTestStringConvertible {
        let name: String
        let kind: String
        let secret: String
        let salt: String
        let type: UInt32?
        let info: String?
        let length: Int
        let output: String
        var testDescription: String { name }
    }

    static func vectors() throws -> [Vector] {
        try Vectors.load("kdf", as: VectorFile<Vector>.self).vectors
    }

    @Test("Derive() reproduces every derive vector", arguments: try vectors().filter { $0.kind == "derive" })
    func deriveVectors(_ vector: Vector) throws {
        let rawType = try #require(vector.type)
        let type = try #require(DerivedValueType(rawValue: rawType))
        let output = derive(secret: hex(vector.secret), salt: hex(vector.salt), type: type, count: vector.length)
        #expect(Hex.encode(output) == vector.output)
    }

    /// The plain HKDF vectors (RFC 5869 TC1 and Chromium's Noise `Split()`) pin down the HKDF the core
    /// builds on: salt, IKM and info in the places the protocol puts them.
    @Test("plain HKDF vectors", arguments: try vectors().filter { $0.kind == "hkdf" })
    func hkdfVectors(_ vector: Vector) throws {
        let output = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: hex(vector.secret)), salt: hex(vector.salt),
            info: hex(try #require(vector.info)), outputByteCount: vector.length
        ).withUnsafeBytes { Array($0) }
        #expect(Hex.encode(output) == vector.output)
    }

    @Test func vectorFileShape() throws {
        let all = try Self.vectors()
        #expect(all.filter { $0.kind == "derive" }.count == 5)
        #expect(all.filter { $0.kind == "hkdf" }.count == 2)
    }

    @Test("DerivedValueType raw values are the wire constants 1…6")
    func typeValues() {
        #expect(DerivedValueType.allCases.map(\.rawValue) == [1, 2, 3, 4, 5, 6])
        #expect(DerivedValueType.eidKey.rawValue == 1)
        #expect(DerivedValueType.tunnelID.rawValue == 2)
        #expect(DerivedValueType.psk.rawValue == 3)
        #expect(DerivedValueType.pairedSecret.rawValue == 4)
        #expect(DerivedValueType.identityKeySeed.rawValue == 5)
        #expect(DerivedValueType.perContactIDSecret.rawValue == 6)
    }

    /// The info is the type as four little-endian bytes: the same HKDF with info `03 00 00 00`.
    @Test func infoIsLittleEndianType() {
        let secret = hex("00112233445566778899aabbccddeeff")
        for type in DerivedValueType.allCases {
            let info: [UInt8] = [UInt8(type.rawValue), 0, 0, 0]
            let expected = HKDF<SHA256>.deriveKey(
                inputKeyMaterial: SymmetricKey(data: secret), salt: [UInt8](), info: info, outputByteCount: 32
            ).withUnsafeBytes { Array($0) }
            #expect(derive(secret: secret, type: type, count: 32) == expected, "type \(type)")
        }
    }

    /// RFC 5869: an empty salt is the same as HashLen zero bytes.
    @Test func emptySaltIsThirtyTwoZeros() {
        let secret = hex("01fea6f7c4807493dc256f9eacf756c9")
        #expect(derive(secret: secret, type: .eidKey, count: 64)
            == derive(secret: secret, salt: [UInt8](repeating: 0, count: 32), type: .eidKey, count: 64))
        #expect(derive(secret: secret, type: .eidKey, count: 64)
            != derive(secret: secret, salt: [1], type: .eidKey, count: 64))
    }

    @Test func differentTypesGiveDifferentOutputs() {
        let secret = [UInt8](repeating: 0x42, count: 16)
        let outputs = Set(DerivedValueType.allCases.map { derive(secret: secret, type: $0, count: 32) })
        #expect(outputs.count == DerivedValueType.allCases.count)
    }

    // MARK: - QRSecretKeys and the PSK

    @Test("QRSecretKeys of decrypt_known: EID key and tunnel ID")
    func qrSecretKeysDecryptKnown() {
        let keys = QRSecretKeys(qrSecret: hex("01fea6f7c4807493dc256f9eacf756c9"))
        #expect(Hex.encode(keys.eidKey) == "66e7d568ef48471de6b84f6f2e7af841cf901e384174f1e668c6b93a1cc4e2d8927395271dcf6397ca338711157764814f141a8fd4bde2dfa53100c5f4d64794")
        #expect(Hex.encode(keys.tunnelID) == "367cbbf5f5085df4098476afe4b9b1d2")
        #expect(keys.eidKey.count == HybridConstants.eidKeySize)
        #expect(keys.tunnelID.count == HybridConstants.tunnelIDSize)
    }

    @Test("QRSecretKeys of the zero secret: tunnel ID from encrypt_decrypt")
    func qrSecretKeysZero() {
        let keys = QRSecretKeys(qrSecret: [UInt8](repeating: 0, count: 16))
        #expect(Hex.encode(keys.tunnelID) == "3eef97097986413b059eaa2a30d653d4")
    }

    @Test("QRSecretKeys of transcript_qr_flow")
    func qrSecretKeysTranscript() throws {
        let transcript = try TranscriptQRInputs.load()
        let keys = QRSecretKeys(qrSecret: hex(transcript.inputs.qr_secret))
        #expect(Hex.encode(keys.eidKey) == transcript.derived.eid_key_64)
        #expect(Hex.encode(Array(keys.eidKey[0..<32])) == transcript.derived.eid_key_aes256_part)
        #expect(Hex.encode(Array(keys.eidKey[32..<64])) == transcript.derived.eid_key_hmac_part)
        #expect(Hex.encode(keys.tunnelID) == transcript.derived.tunnel_id_16)
    }

    @Test("derivePSK is salted with the whole 16-byte EID plaintext", arguments: [
        ("01fea6f7c4807493dc256f9eacf756c9", "008bb5c5c9a44d913a5eb20265550000", "839f4fa0f797563fc485031e4bec7e60b0f07fbc58fcda6815c8e9b1eec698bb"),
        ("00000000000000000000000000000000", "00098b736b36a98cb9a42f090a0b80f9", "1e887a78fb7426148b114a9dfd7b296eb26bebb43934688b7c28e274e0a6bf7d"),
        ("000102030405060708090a0b0c0d0e0f", "00a0a1a2a3a4a5a6a7a8a92a00000000", "d300f200ffd4e3655cec0410c5f2d0d65fd6c8204554236a1840c357759f985c"),
        ("baaf4b1b883b79ccfb7634332b05e78a15e25c9c2f757d1b14ddc761cfebc30d", "00404142434445464748494a4b4c3412", "9136f76aa54681bb010c0351d0134c09ae9fc6f869b2d606a709bd0374476686"),
    ])
    func psk(secret: String, eidPlaintext: String, psk: String) {
        let output = derivePSK(secret: hex(secret), eidPlaintext: hex(eidPlaintext))
        #expect(Hex.encode(output) == psk)
        #expect(output == derive(secret: hex(secret), salt: hex(eidPlaintext), type: .psk, count: 32))
        // Dropping the reserved byte from the salt gives another key.
        #expect(output != derive(secret: hex(secret), salt: Array(hex(eidPlaintext).dropFirst()), type: .psk, count: 32))
    }

    /// The PSK and linked-flow values above come from these files; check they still say so.
    @Test func pskVectorsMatchTheirFiles() throws {
        let qr = try TranscriptQRInputs.load()
        #expect(qr.advert.psk_32 == "d300f200ffd4e3655cec0410c5f2d0d65fd6c8204554236a1840c357759f985c")
        #expect(qr.advert.eid_plaintext_16 == "00a0a1a2a3a4a5a6a7a8a92a00000000")
        let linked = try LinkedTranscriptInputs.load()
        #expect(linked.derived.psk == "9136f76aa54681bb010c0351d0134c09ae9fc6f869b2d606a709bd0374476686")
        #expect(linked.inputs.paired_secret == "baaf4b1b883b79ccfb7634332b05e78a15e25c9c2f757d1b14ddc761cfebc30d")
        #expect(linked.inputs.eid_plaintext_16 == "00404142434445464748494a4b4c3412")
    }

    /// Linked flow (PROTOCOL.md §9): EID key = Derive(link secret, client nonce, 1, 64).
    @Test func linkedFlowEIDKey() throws {
        let linked = try LinkedTranscriptInputs.load()
        let eidKey = derive(
            secret: hex(linked.inputs.paired_secret), salt: hex(linked.inputs.client_nonce_16), type: .eidKey, count: 64)
        #expect(Hex.encode(eidKey) == linked.derived.eid_key)
    }

    /// Phone-side derivations of the linking information (PROTOCOL.md §2.2, §8.3):
    /// per-contact-ID secret = Derive(root, contact ID, 6, 32); link secret = Derive(that, pairing ID, 4, 32).
    @Test func phoneSideLinkingDerivations() throws {
        let linking = try LinkedTranscriptInputs.load().linking_info_in_qr_flow
        let perContact = derive(
            secret: hex(linking.phone_root_secret), salt: hex(linking.contact_id), type: .perContactIDSecret, count: 32)
        #expect(Hex.encode(perContact) == linking.per_contact_id_secret)
        let paired = derive(secret: perContact, salt: hex(linking.pairing_id_8), type: .pairedSecret, count: 32)
        #expect(Hex.encode(paired) == linking.paired_secret)
    }
}
