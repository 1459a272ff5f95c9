import CTAP2
import Crypto
import HybridTestSupport
import Testing

/// EC2 P-256 ES256 COSE keys.
@Suite("COSEKey")
struct COSEKeyTests {
    @Test("round trip through CBOR and swift-crypto")
    func roundTrip() throws {
        let publicKey = P256.Signing.PrivateKey().publicKey
        let key = COSEKey(publicKey: publicKey)
        let bytes = key.encode()
        #expect(bytes.count == 77)
        #expect(Array(bytes.prefix(10)) == hex("a5 01 02 03 26 20 01 21 58 20"))
        let decoded = try COSEKey(bytes: bytes)
        #expect(decoded == key)
        #expect(decoded.publicKey.x963Representation == publicKey.x963Representation)
        #expect(decoded.x963Representation == [0x04] + decoded.x + decoded.y)
        #expect(try COSEKey(x: key.x, y: key.y) == key)
    }

    @Test("extra COSE parameters are ignored")
    func extraKeysIgnored() throws {
        let key = COSEKey(publicKey: P256.Signing.PrivateKey().publicKey)
        guard case .map(var map) = key.cbor else { return }
        map[2] = .bytes([1, 2])  // kid
        map[4] = [1]  // key_ops
        #expect(try COSEKey(cbor: .map(map)) == key)
    }

    @Test("wrong types and sizes")
    func wrongTypes() throws {
        let key = COSEKey(publicKey: P256.Signing.PrivateKey().publicKey)
        guard case .map(let map) = key.cbor else { return }
        var textKty = map
        textKty[1] = "EC2"
        #expect(throws: CTAP2Error(.wrongType)) { try COSEKey(cbor: .map(textKty)) }
        var textX = map
        textX[-2] = "x"
        #expect(throws: CTAP2Error(.wrongType)) { try COSEKey(cbor: .map(textX)) }
        var longY = map
        longY[-3] = .bytes(Array(repeating: 1, count: 33))
        #expect(throws: CTAP2Error(.invalidLength)) { try COSEKey(cbor: .map(longY)) }
        #expect(throws: CTAP2Error(.wrongType)) { try COSEKey(cbor: [1, 2]) }
        #expect(throws: CTAP2Error(.invalidPublicKey)) { try COSEKey(x963Representation: [0x04] + Array(repeating: 0, count: 64)) }
        #expect(throws: CTAP2Error(.invalidPublicKey)) { try COSEKey(x963Representation: [0x02] + key.x) }
        #expect(throws: CTAP2Error(.invalidCBOR)) { try COSEKey(bytes: key.encode().dropLast()) }
    }

    @Test("the lenient decoder accepts unsorted keys; the default does not")
    func canonicalOption() throws {
        let key = COSEKey(publicKey: P256.Signing.PrivateKey().publicKey)
        let unsorted: [UInt8] = [0xA5, 0x03, 0x26, 0x01, 0x02, 0x20, 0x01, 0x21, 0x58, 0x20] + key.x + [0x22, 0x58, 0x20] + key.y
        #expect(throws: CTAP2Error(.invalidCBOR)) { try COSEKey(bytes: unsorted) }
        #expect(try COSEKey(bytes: unsorted, requireCanonical: false) == key)
    }

    @Test("COSE algorithm identifiers describe themselves")
    func algorithms() {
        #expect(COSEAlgorithmIdentifier.es256.rawValue == -7)
        #expect(COSEAlgorithmIdentifier.rs256.description == "RS256 (-257)")
        #expect(COSEAlgorithmIdentifier(rawValue: -65535).description == "COSE algorithm -65535")
    }
}
