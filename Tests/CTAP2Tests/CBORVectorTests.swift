import CTAP2
import HybridTestSupport
import Testing

/// `Vectors/cbor.json`: RFC 8949 Appendix A examples, CTAP2 key order, decoder rejections.
@Suite("CBOR vectors")
struct CBORVectorTests {
    @Test("the vector file loads and has both kinds of case")
    func vectorFileLoads() throws {
        let file = try Vectors.load("cbor", as: VectorFile<CBORCase>.self)
        #expect(file.vectors.count == CBORCase.all.count)
        #expect(CBORCase.positive.count >= 40)
        #expect(CBORCase.negative.count >= 40)
    }

    @Test("decodes to the diagnostic and re-encodes byte-exact", arguments: CBORCase.positive)
    func positive(_ vector: CBORCase) throws {
        let value = try CBOR.decode(vector.bytes)
        if let diagnostic = vector.diagnostic {
            #expect(value.description == diagnostic)
        }
        #expect(CBOR.encode(value) == vector.bytes)
        let prefix = try CBOR.decodePrefix(vector.bytes + [0x00, 0xFF])
        #expect(prefix.value == value)
        #expect(prefix.length == vector.bytes.count)
    }

    @Test("is rejected with the expected CBORError code", arguments: CBORCase.negative)
    func negative(_ vector: CBORCase) throws {
        let expected = try #require(vector.expectError.flatMap(CBORError.Code.init(rawValue:)), "unknown code")
        #expect(throws: CBORError(expected, offset: 0)) { try CBOR.decode(vector.bytes) }
    }

    @Test("every proper prefix of a valid item is truncated", arguments: CBORCase.positive)
    func everyPrefixTruncated(_ vector: CBORCase) {
        let bytes = vector.bytes
        for length in 0..<bytes.count {
            #expect(throws: CBORError(.truncated), "prefix of \(length) bytes") {
                try CBOR.decode(bytes.prefix(length))
            }
        }
    }

    @Test("a valid item followed by any byte has trailing bytes", arguments: CBORCase.positive)
    func trailingByte(_ vector: CBORCase) {
        #expect(throws: CBORError(.trailingBytes)) { try CBOR.decode(vector.bytes + [0x00]) }
    }
}
