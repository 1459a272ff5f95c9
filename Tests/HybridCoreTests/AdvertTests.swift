import CTAP2
import HybridCore
import HybridTestSupport
import Testing

/// `EID` and `AdvertCipher` against `Vectors/eid.json` and the transcripts (PROTOCOL.md §3).
@Suite struct AdvertTests {
    struct Vector: Decodable, Sendable, CustomTestStringConvertible {
        let name: String
        let qrSecret: String?
        let advert: String?
        let eidKey: String?
        let eidPlaintext: String
        let nonce: String?
        let routingID: String?
        let domainID: UInt16?
        let newTunnelURL: String?
        let connectURL: String?
        let connectURLDomain0: String?
        let connectURLDomain1: String?
        let psk: String?
        let expectError: String?
        var testDescription: String { name }
    }

    static func vectors() throws -> [Vector] {
        try Vectors.load("eid", as: VectorFile<Vector>.self).vectors
    }

    static func adverts() throws -> [Vector] { try vectors().filter { $0.advert != nil } }

    // MARK: - Known answers

    @Test("adverts decrypt to the listed EID, PSK and URLs", arguments: try adverts())
    func decryptsKnownAdvert(_ vector: Vector) throws {
        let keys = QRSecretKeys(qrSecret: hex(try #require(vector.qrSecret)))
        if let eidKey = vector.eidKey { #expect(Hex.encode(keys.eidKey) == eidKey) }
        let cipher = AdvertCipher(eidKey: keys.eidKey)
        let result = cipher.decrypt(advert: hex(try #require(vector.advert)))
        guard case .matched(let plaintext, let eid) = result else {
            Issue.record("advert did not match: \(result)")
            return
        }
        #expect(Hex.encode(plaintext) == vector.eidPlaintext)
        #expect(Hex.encode(eid.nonce) == vector.nonce)
        #expect(Hex.encode(eid.routingID) == vector.routingID)
        #expect(eid.domain.rawValue == vector.domainID)
        #expect(eid.bytes == plaintext)
        #expect(Hex.encode(derivePSK(secret: hex(try #require(vector.qrSecret)), eidPlaintext: plaintext)) == vector.psk)

        let base = try #require(eid.domain.baseURL)
        #expect(base + TunnelServicePath.new(tunnelID: keys.tunnelID).path == vector.newTunnelURL)
        #expect(base + TunnelServicePath.connect(routingID: eid.routingID, tunnelID: keys.tunnelID).path == vector.connectURL)
        let connectPath = TunnelServicePath.connect(routingID: eid.routingID, tunnelID: keys.tunnelID).path
        if let domain0 = vector.connectURLDomain0 {
            #expect(try #require(TunnelDomainID.google.baseURL) + connectPath == domain0)
        }
        if let domain1 = vector.connectURLDomain1 {
            #expect(try #require(TunnelDomainID.apple.baseURL) + connectPath == domain1)
        }
    }

    @Test("encrypting the EID plaintext reproduces the advert", arguments: try adverts())
    func encryptReproducesAdvert(_ vector: Vector) throws {
        let cipher = AdvertCipher(eidKey: QRSecretKeys(qrSecret: hex(try #require(vector.qrSecret))).eidKey)
        #expect(Hex.encode(cipher.encrypt(plaintext: hex(vector.eidPlaintext))) == vector.advert)
    }

    @Test("EID components build the listed plaintext", arguments: try vectors().filter { $0.expectError == nil })
    func eidFromComponents(_ vector: Vector) throws {
        let nonce = try #require(vector.nonce)
        let routingID = try #require(vector.routingID)
        let eid = EID(
            nonce: hex(nonce), routingID: hex(routingID), domain: TunnelDomainID(rawValue: try #require(vector.domainID)))
        #expect(Hex.encode(eid.bytes) == vector.eidPlaintext)
        #expect(try EID(bytes: eid.bytes) == eid)
    }

    @Test("EID plaintexts parse to their components", arguments: try vectors().filter { $0.expectError == nil })
    func eidParses(_ vector: Vector) throws {
        let eid = try EID(bytes: hex(vector.eidPlaintext))
        #expect(Hex.encode(eid.nonce) == vector.nonce)
        #expect(Hex.encode(eid.routingID) == vector.routingID)
        #expect(eid.domain.rawValue == vector.domainID)
    }

    @Test("EID rejections", arguments: try vectors().filter { $0.expectError != nil })
    func eidRejects(_ vector: Vector) throws {
        let expected = try expectedError(vector.expectError)
        #expect(throws: expected) { try EID(bytes: hex(vector.eidPlaintext)) }
    }

    @Test func vectorFileShape() throws {
        let all = try Self.vectors()
        #expect(try Self.adverts().count == 2)
        #expect(all.filter { $0.expectError != nil }.count == 3)
    }

    @Test("EID length other than 16 bytes is rejected", arguments: [0, 1, 14, 15, 17, 20, 32])
    func eidLengths(_ count: Int) {
        let bytes = [UInt8](repeating: 0, count: count)
        #expect(throws: HybridError(.invalidAdvert)) { try EID(bytes: bytes) }
    }

    @Test("the domain is little-endian; 0, 1 and ≥ 256 are accepted, 2…255 rejected")
    func eidDomainRule() throws {
        let prefix = [UInt8](repeating: 0, count: 14)
        for id in 0...600 {
            let bytes = prefix + [UInt8(id & 0xFF), UInt8(id >> 8)]
            if (2...255).contains(id) {
                #expect(throws: HybridError(.invalidAdvert), "domain \(id)") { try EID(bytes: bytes) }
            } else {
                #expect(try EID(bytes: bytes).domain.rawValue == UInt16(id))
            }
        }
        #expect(try EID(bytes: prefix + [0xFF, 0xFF]).domain.rawValue == 0xFFFF)
    }

    @Test("a non-zero reserved byte is rejected", arguments: [0x01, 0x80, 0xFF])
    func eidReservedByte(_ reserved: UInt8) {
        #expect(throws: HybridError(.invalidAdvert)) { try EID(bytes: [reserved] + [UInt8](repeating: 0, count: 15)) }
    }

    @Test("transcript_qr_flow: AES block, HMAC and advert")
    func transcriptQRAdvert() throws {
        let t = try TranscriptQRInputs.load()
        let eid = EID(
            nonce: hex(t.inputs.eid_nonce), routingID: hex(t.inputs.routing_id),
            domain: TunnelDomainID(rawValue: t.inputs.tunnel_server_domain_id))
        #expect(Hex.encode(eid.bytes) == t.advert.eid_plaintext_16)
        let cipher = AdvertCipher(eidKey: hex(t.derived.eid_key_64))
        let advert = cipher.encrypt(plaintext: eid.bytes)
        #expect(Hex.encode(advert) == t.advert.advert_20)
        #expect(Hex.encode(Array(advert[0..<16])) == t.advert.aes256_ecb_ciphertext_16)
        #expect(t.advert.hmac_sha256_full_over_ciphertext.hasPrefix(Hex.encode(Array(advert[16..<20]))))
        #expect(cipher.decrypt(advert: advert) == .matched(plaintext: eid.bytes, eid: eid))
    }

    /// The linked flow's EID is random apart from byte 0 (PROTOCOL.md §3.2); this one happens to name
    /// hashed domain 0x1234, so the desktop's rules accept it.
    @Test("transcript_linked_flow: advert under Derive(link secret, client nonce, 1, 64)")
    func transcriptLinkedAdvert() throws {
        let t = try LinkedTranscriptInputs.load()
        let cipher = AdvertCipher(eidKey: hex(t.derived.eid_key))
        let plaintext = hex(t.inputs.eid_plaintext_16)
        #expect(Hex.encode(cipher.encrypt(plaintext: plaintext)) == t.derived.advert_20)
        guard case .matched(let decrypted, let eid) = cipher.decrypt(advert: hex(t.derived.advert_20)) else {
            Issue.record("linked advert did not match")
            return
        }
        #expect(decrypted == plaintext)
        #expect(eid.domain.rawValue == 0x1234)
    }

    @Test("zero secret: random EIDs round-trip through encrypt and decrypt")
    func zeroSecretRoundTrip() throws {
        let cipher = AdvertCipher(eidKey: QRSecretKeys(qrSecret: [UInt8](repeating: 0, count: 16)).eidKey)
        let random = RandomSource.deterministic(seed: Array("AdvertTests".utf8))
        for index in 0..<200 {
            let raw = random.bytes(15)
            var domain = TunnelDomainID(rawValue: UInt16(raw[13]) | UInt16(raw[14]) << 8)
            if domain.host == nil { domain = index.isMultiple(of: 2) ? .google : .apple }
            let eid = EID(nonce: Array(raw[0..<10]), routingID: Array(raw[10..<13]), domain: domain)
            let advert = cipher.encrypt(plaintext: eid.bytes)
            #expect(advert.count == HybridConstants.advertSize)
            #expect(cipher.decrypt(advert: advert) == .matched(plaintext: eid.bytes, eid: eid), "EID \(index)")
        }
    }

    // MARK: - Tamper

    @Test("every single-bit flip of a real advert is not ours", arguments: try adverts())
    func bitFlipsAreNotOurs(_ vector: Vector) throws {
        let cipher = AdvertCipher(eidKey: QRSecretKeys(qrSecret: hex(try #require(vector.qrSecret))).eidKey)
        let advert = hex(try #require(vector.advert))
        #expect(cipher.decrypt(advert: advert) != .notOurs)
        for index in 0..<advert.count {
            for bit in 0..<8 {
                let result = cipher.decrypt(advert: flipping(advert, at: index, mask: 1 << UInt8(bit)))
                #expect(result == .notOurs, "byte \(index) bit \(bit)")
            }
        }
    }

    @Test("any length other than 20 is not ours", arguments: try adverts())
    func wrongLengthsAreNotOurs(_ vector: Vector) throws {
        let cipher = AdvertCipher(eidKey: QRSecretKeys(qrSecret: hex(try #require(vector.qrSecret))).eidKey)
        let advert = hex(try #require(vector.advert))
        for count in 0..<20 {
            #expect(cipher.decrypt(advert: Array(advert.prefix(count))) == .notOurs, "prefix \(count)")
        }
        // A valid advert with trailing bytes (libwebauthn's CTAP 2.3 suffix) is not accepted here.
        for extra in 1...8 {
            #expect(cipher.decrypt(advert: advert + [UInt8](repeating: 0, count: extra)) == .notOurs)
        }
    }

    @Test("another session's key does not match", arguments: try adverts())
    func otherKeyIsNotOurs(_ vector: Vector) throws {
        let other = AdvertCipher(eidKey: QRSecretKeys(qrSecret: [UInt8](repeating: 0x5A, count: 16)).eidKey)
        #expect(other.decrypt(advert: hex(try #require(vector.advert))) == .notOurs)
    }

    @Test("a tag-valid advert with a bad reserved byte is rejected, not 'not ours'", arguments: [0x01, 0x02, 0x80, 0xFF])
    func badReservedByteRejected(_ reserved: UInt8) {
        let cipher = AdvertCipher(eidKey: QRSecretKeys(qrSecret: [UInt8](repeating: 0, count: 16)).eidKey)
        let plaintext = [reserved] + hex("098b736b36a98cb9a42f090a0b0000")
        #expect(cipher.decrypt(advert: cipher.encrypt(plaintext: plaintext)) == .rejected(HybridError(.invalidAdvert)))
    }

    @Test("a tag-valid advert naming domain 2…255 is rejected")
    func unknownDomainRejected() {
        let cipher = AdvertCipher(eidKey: QRSecretKeys(qrSecret: hex("01fea6f7c4807493dc256f9eacf756c9")).eidKey)
        let head = hex("008bb5c5c9a44d913a5eb2026555")
        for id in 2...255 {
            let advert = cipher.encrypt(plaintext: head + [UInt8(id), 0])
            let result = cipher.decrypt(advert: advert)
            #expect(result == .rejected(HybridError(.invalidAdvert)), "domain \(id)")
            if case .rejected(let error) = result { #expect(error.code == .invalidAdvert) }
        }
        for id in [0, 1, 256, 0xFFFF] {
            let plaintext = head + [UInt8(id & 0xFF), UInt8(id >> 8)]
            #expect(cipher.decrypt(advert: cipher.encrypt(plaintext: plaintext)) != .notOurs)
            #expect(cipher.decrypt(advert: cipher.encrypt(plaintext: plaintext)) != .rejected(HybridError(.invalidAdvert)))
        }
    }
}
