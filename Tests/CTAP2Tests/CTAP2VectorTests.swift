import CTAP2
import HybridTestSupport
import Testing

/// `Vectors/ctap2.json`: every positive case decodes and re-encodes byte-exact, every negative case
/// fails with its code. Field-level checks of the same vectors live in the per-type suites.
@Suite("CTAP2 vectors")
struct CTAP2VectorTests {
    @Test("the vector file loads and has both kinds of case")
    func vectorFileLoads() throws {
        let file = try Vectors.load("ctap2", as: VectorFile<CTAP2Case>.self)
        #expect(file.vectors.count == CTAP2Case.all.count)
        #expect(CTAP2Case.positive.count >= 20)
        #expect(CTAP2Case.negative.count >= 40)
        #expect(file.vectors.allSatisfy { !$0.source.isEmpty })
    }

    /// Byte-exact, or to `expect.reencoded` where decoding drops bytes on purpose (an error
    /// response's bytes after its status).
    @Test("decodes and re-encodes byte-exact", arguments: CTAP2Case.positive)
    func positive(_ vector: CTAP2Case) throws {
        #expect(try vector.decodeAndReencode() == (vector.expect?["reencoded"].map(hex) ?? vector.bytes))
    }

    @Test("is rejected with the expected CTAP2Error code", arguments: CTAP2Case.negative)
    func negative(_ vector: CTAP2Case) throws {
        let expected = try #require(vector.expectError.flatMap(CTAP2Error.Code.init(rawValue:)), "unknown code")
        do {
            let output = try vector.decodeAndReencode()
            Issue.record("accepted, re-encoded to \(Hex.encode(output))")
        } catch {
            #expect(error.code == expected, "\(error)")
            #expect(!error.reason.isEmpty)
        }
    }
}
