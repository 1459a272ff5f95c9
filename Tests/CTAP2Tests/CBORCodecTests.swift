@testable import CTAP2
import HybridTestSupport
import Testing

/// The CBOR codec on values built in Swift: encoding known answers, CTAP2 key order, decoder limits.
@Suite("CBOR codec")
struct CBORCodecTests {
    @Test(
        "encodes RFC 8949 Appendix A examples",
        arguments: [
            (CBORValue.unsigned(0), "00"), (23, "17"), (24, "1818"), (100, "1864"), (1000, "1903e8"),
            (1_000_000, "1a000f4240"), (.unsigned(UInt64.max), "1bffffffffffffffff"),
            (.negative(UInt64.max), "3bffffffffffffffff"), (-1, "20"), (-10, "29"), (-100, "3863"),
            (-1000, "3903e7"), ("", "60"), ("a", "6161"), ("IETF", "6449455446"), ("\"\\", "62225c"),
            ("ü", "62c3bc"), ("水", "63e6b0b4"), (.bytes([]), "40"), (.bytes([1, 2, 3, 4]), "4401020304"),
            ([], "80"), ([1, [2, 3], [4, 5]], "8301820203820405"), ([:], "a0"), ([1: 2, 3: 4], "a201020304"),
            (["a": 1, "b": [2, 3]], "a26161016162820203"), (["a", ["b": "c"]], "826161a161626163"),
            (false, "f4"), (true, "f5"), (.null, "f6"), (.undefined, "f7"),
        ] as [(CBORValue, String)]
    )
    func encodesKnownAnswers(_ value: CBORValue, _ expected: String) throws {
        #expect(CBOR.encode(value) == hex(expected))
        #expect(try CBOR.decode(hex(expected)) == value)
    }

    @Test("integer boundaries use the shortest head", arguments: [
        (UInt64(23), "17"), (24, "1818"), (255, "18ff"), (256, "190100"), (65535, "19ffff"),
        (65536, "1a00010000"), (4_294_967_295, "1affffffff"), (4_294_967_296, "1b0000000100000000"),
    ])
    func integerBoundaries(_ n: UInt64, _ expected: String) throws {
        #expect(CBOR.encode(.unsigned(n)) == hex(expected))
        #expect(CBOR.encode(.negative(n)) == [hex(expected)[0] | 0x20] + hex(expected).dropFirst())
        #expect(try CBOR.decode(hex(expected)) == .unsigned(n))
    }

    @Test("Int helpers cover the whole Int range")
    func intHelpers() {
        #expect(CBORValue.int(Int.min) == .negative(UInt64(Int.max)))
        #expect(CBORValue.negative(UInt64(Int.max)).intValue == Int.min)
        #expect(CBORValue.negative(UInt64(Int.max) + 1).intValue == nil)
        #expect(CBORValue.unsigned(UInt64(Int.max) + 1).intValue == nil)
        #expect(CBORValue.int(-7) == .negative(6))
    }

    @Test("map keys are written in CTAP2 order: COSE key 1, 3, -1, -2, -3")
    func coseKeyOrder() {
        let key: CBORValue = [-3: .bytes([0xBB]), -2: .bytes([0xAA]), -1: 1, 3: -7, 1: 2]
        #expect(CBOR.encode(key) == hex("a5 01 02 03 26 20 01 21 41aa 22 41bb"))
    }

    @Test("text keys: shorter first, then bytewise: \"a\" < \"b\" < \"aa\"")
    func textKeyOrder() {
        let map: CBORValue = ["aa": 1, "b": 2, "a": 3]
        #expect(CBOR.encode(map) == hex("a3 6161 03 6162 02 626161 01"))
        let sorted = CBOR.canonicallySorted(["aa": 1, "b": 2, "a": 3]).map(\.key)
        #expect(sorted == ["a", "b", "aa"])
    }

    @Test("major type decides first: unsigned < negative < bytes < text < array < map < simple")
    func majorTypeOrder() {
        let map: CBORValue = [
            false: 8, [:]: 7, [1]: 6, "a": 5, .bytes([0]): 4, -1: 3, 1000: 2, 0: 1,
        ]
        #expect(CBOR.encode(map) == hex("a8 00 01 1903e8 02 20 03 4100 04 6161 05 8101 06 a0 07 f4 08"))
    }

    @Test("CTAP2 length-first order differs from RFC 8949 bytewise order: [-1] before [100]")
    func lengthFirstOrder() throws {
        let map: CBORValue = [[100]: 1, [-1]: 2]
        #expect(CBOR.encode(map) == hex("a2 8120 02 811864 01"))
        #expect(throws: CBORError(.nonCanonical)) { try CBOR.decode(hex("a2 811864 01 8120 02")) }
    }

    @Test("non-canonical input decodes when requireCanonical is off")
    func lenientOptions() throws {
        let lenient = CBORDecodingOptions(requireCanonical: false)
        #expect(try CBOR.decode(hex("1800"), options: lenient) == 0)
        #expect(try CBOR.decode(hex("a2 02 00 01 00"), options: lenient) == [1: 0, 2: 0])
        #expect(throws: CBORError(.duplicateMapKey)) { try CBOR.decode(hex("a2 01 00 01 00"), options: lenient) }
        #expect(throws: CBORError(.indefiniteLength)) { try CBOR.decode(hex("9f ff"), options: lenient) }
    }

    @Test("nesting: 16 levels decode, 17 do not; maxDepth is adjustable")
    func depthLimit() throws {
        let sixteen = [UInt8](repeating: 0x81, count: 16) + [0x00]
        let seventeen = [UInt8](repeating: 0x81, count: 17) + [0x00]
        _ = try CBOR.decode(sixteen)
        #expect(throws: CBORError(.nestingTooDeep)) { try CBOR.decode(seventeen) }
        #expect(throws: CBORError(.nestingTooDeep)) { try CBOR.decode(hex("8180"), options: .init(maxDepth: 1)) }
        // A hostile 10,000-deep input fails fast instead of recursing.
        #expect(throws: CBORError(.nestingTooDeep)) { try CBOR.decode([UInt8](repeating: 0x81, count: 10_000)) }
    }

    @Test("huge lengths fail without allocating")
    func hugeLengths() {
        for input in ["5bffffffffffffffff", "7bffffffffffffffff", "9bffffffffffffffff", "bbffffffffffffffff",
            "9a7fffffff", "ba7fffffff00"] {
            #expect(throws: CBORError(.truncated), "\(input)") { try CBOR.decode(hex(input)) }
        }
    }

    @Test("decodePrefix stops after the first item, as revision-0 padding needs")
    func decodePrefix() throws {
        let (value, length) = try CBOR.decodePrefix(hex("a10102 000000 0300"))
        #expect(value == [1: 2])
        #expect(length == 3)
        #expect(throws: CBORError(.truncated)) { try CBOR.decodePrefix(hex("a101")) }
    }

    @Test("errors compare by code and describe the offset")
    func errorEquality() throws {
        let error = CBORError(.truncated, offset: 7)
        #expect(error == CBORError(.truncated))
        #expect(error != CBORError(.trailingBytes))
        #expect(error.description.contains("offset 7"))
        do {
            _ = try CBOR.decode(hex("82 01 19 01"))
            Issue.record("decoded a truncated array")
        } catch {
            #expect(error.code == .truncated)
            #expect(error.offset == 3)  // inside the 2-byte argument of the second element
        }
        do {
            _ = try CBOR.decode(hex("83 01 02"))
            Issue.record("decoded a truncated array")
        } catch {
            #expect(error.offset == 0)  // the count (3) exceeds the bytes left, caught at the array head
        }
    }

    @Test("text keys are compared by their bytes, as CBOR does: canonically equivalent spellings are two keys, not a duplicate")
    func unicodeKeys() throws {
        // "é" as U+00E9 (c3 a9) and as e + U+0301 (65 cc 81): equal Swift Strings, different CBOR.
        let both = hex("a2 62c3a9 01 6365cc81 02")
        let value = try CBOR.decode(both)
        #expect(value.mapValue?.count == 2)
        #expect(value.mapValue?[.text("\u{E9}")] == .int(1))
        #expect(value.mapValue?[.text("e\u{301}")] == .int(2))
        #expect(CBOR.encode(value) == both, "both keys come back, each with its own bytes, in canonical order")
        #expect(CBORValue.text("\u{E9}") != CBORValue.text("e\u{301}"))
        #expect(Set<CBORValue>([.text("\u{E9}"), .text("e\u{301}"), .text("\u{E9}")]).count == 2)
        // The same bytes twice are still a duplicate.
        #expect(throws: CBORError(.duplicateMapKey)) { try CBOR.decode(hex("a2 6365cc81 01 6365cc81 02")) }
        // Where CTAP2 reads such a map by name (extensions, attestation statements), the two cannot
        // both be kept: refused, not one of them dropped at random.
        #expect(throws: CTAP2Error.self) { try CBORKind<[String: CBORValue]>.textKeyedMap.convert(value, "extensions") }
        let ascii = try CBORKind<[String: CBORValue]>.textKeyedMap.convert(try CBOR.decode(hex("a2 6161 01 6162 02")), "extensions")
        #expect(ascii == ["a": .int(1), "b": .int(2)])
        // A lone key keeps its exact bytes through a round trip.
        let decomposed = hex("a1 6365cc81 01")
        #expect(CBOR.encode(try CBOR.decode(decomposed)) == decomposed)
    }
}
