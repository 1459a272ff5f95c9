import HybridCore
import HybridTestSupport
import Testing

/// `Digits` (Chromium `BytesToDigits` / `DigitsToBytes`) against `Vectors/digits.json` and the
/// chunk-size rules of PROTOCOL.md §1.2.
@Suite struct DigitsTests {
    struct Vector: Decodable, Sendable, CustomTestStringConvertible {
        let name: String
        let bytes: String?
        let digits: String
        let expectError: String?
        var testDescription: String { "\(name) [\(digits)]" }
    }

    static func vectors() throws -> [Vector] {
        try Vectors.load("digits", as: VectorFile<Vector>.self).vectors
    }

    @Test("every positive vector encodes to its digits", arguments: try vectors().filter { $0.expectError == nil })
    func encodes(_ vector: Vector) throws {
        let bytes = hex(try #require(vector.bytes))
        #expect(Digits.encode(bytes) == vector.digits)
    }

    @Test("every positive vector decodes to its bytes", arguments: try vectors().filter { $0.expectError == nil })
    func decodes(_ vector: Vector) throws {
        let bytes = hex(try #require(vector.bytes))
        #expect(try Digits.decode(vector.digits) == bytes)
    }

    @Test("every negative vector is rejected with its code", arguments: try vectors().filter { $0.expectError != nil })
    func rejects(_ vector: Vector) throws {
        let expected = try expectedError(vector.expectError)
        #expect(throws: expected) { try Digits.decode(vector.digits) }
    }

    @Test("the vector file has both positive and negative cases")
    func vectorFileShape() throws {
        let all = try Self.vectors()
        #expect(all.filter { $0.expectError == nil }.count >= 20)
        #expect(all.filter { $0.expectError != nil }.count >= 8)
    }

    /// Chromium `TEST(CableV2Encoding, Digits)` also rejects these.
    @Test(arguments: ["a", "ab", "abc", "999", " 000", "000 ", "+00", "-00", "0x0", "٠٠٠", "00\u{0}"])
    func rejectsChromiumAndWhitespaceCases(_ digits: String) {
        #expect(throws: HybridError(.invalidDigits)) { try Digits.decode(digits) }
    }

    /// A final group of r digits is valid only for r ∈ {0, 3, 5, 8, 10, 13, 15} (1…6 bytes).
    @Test func remainderLengths() throws {
        let bytesForRemainder = [0: 0, 3: 1, 5: 2, 8: 3, 10: 4, 13: 5, 15: 6]
        for length in 0...60 {
            let digits = String(repeating: "0", count: length)
            if let partial = bytesForRemainder[length % 17] {
                #expect(try Digits.decode(digits) == [UInt8](repeating: 0, count: 7 * (length / 17) + partial), "length \(length)")
            } else {
                #expect(throws: HybridError(.invalidDigits), "length \(length)") { try Digits.decode(digits) }
            }
        }
    }

    /// For a chunk of n bytes the largest value 2^(8n) − 1 decodes and 2^(8n) is out of range.
    @Test(arguments: 1...7)
    func chunkRange(byteCount: Int) throws {
        let width = [0, 3, 5, 8, 10, 13, 15, 17][byteCount]
        let limit = UInt64(1) << UInt64(8 * byteCount)
        let largest = String(limit - 1)
        let tooLarge = String(limit)
        let pad = { (s: String) in String(repeating: "0", count: width - s.count) + s }
        #expect(try Digits.decode(pad(largest)) == [UInt8](repeating: 0xFF, count: byteCount))
        #expect(Digits.encode([UInt8](repeating: 0xFF, count: byteCount)) == pad(largest))
        #expect(throws: HybridError(.invalidDigits)) { try Digits.decode(pad(tooLarge)) }
        // The same out-of-range chunk after a valid 17-digit chunk is caught too.
        #expect(throws: HybridError(.invalidDigits)) { try Digits.decode(String(repeating: "0", count: 17) + pad(tooLarge)) }
    }

    @Test("round trip of every length 0…100, and the digit count formula")
    func roundTrip() throws {
        let random = RandomSource.deterministic(seed: Array("DigitsTests".utf8))
        for length in 0...100 {
            let bytes = random.bytes(length)
            let digits = Digits.encode(bytes)
            #expect(digits.utf8.count == 17 * (length / 7) + [0, 3, 5, 8, 10, 13, 15][length % 7])
            #expect(digits.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
            #expect(try Digits.decode(digits) == bytes, "length \(length)")
        }
    }

    @Test func acceptsSubstrings() throws {
        let url = "FIDO:/16736865"
        #expect(try Digits.decode(url.dropFirst(6)) == [0x61, 0x62, 0xFF])
    }

    @Test("a group out of range or a final group of another width says how groups are written (an encoder without leading zeros breaks both)")
    func widthRuleNamed() {
        for (digits, start) in [("999", "digit group 0 is out of range for 1 bytes ("), ("1234", "a final group of 4 digits encodes no whole number of bytes (")] {
            do {
                _ = try Digits.decode(digits)
                Issue.record("\(digits) decoded")
            } catch {
                #expect(error.reason.hasPrefix(start), "\(error.reason)")
                #expect(error.reason.contains("17 digits with leading zeros"), "\(error.reason)")
            }
        }
    }
}

extension DigitsTests {
    @Test("a character that is not a digit is named, escaped, with its position; trailing whitespace is called that",
          arguments: [
            ("000\n", "character 4 of the digits, \"\\u{A}\" (U+000A), is not an ASCII digit: the digits end in trailing whitespace \"\\u{A}\""),
            ("000\r\n", "character 4 of the digits, \"\\u{D}\" (U+000D), is not an ASCII digit: the digits end in trailing whitespace \"\\u{D}\\u{A}\""),
            ("000\t", "character 4 of the digits, \"\\u{9}\" (U+0009), is not an ASCII digit: the digits end in trailing whitespace"),
            ("000 ", "character 4 of the digits, \" \" (U+0020), is not an ASCII digit: the digits end in trailing whitespace"),
            ("000\u{0}", "character 4 of the digits, \"\\u{0}\" (U+0000), is not an ASCII digit: the digits end in trailing NUL characters \"\\u{0}\""),
            ("000 \u{0}", "character 4 of the digits, \" \" (U+0020), is not an ASCII digit: the digits end in trailing whitespace and NUL characters"),
            ("0a0", "character 2 of the digits, \"a\" (U+0061), is not an ASCII digit"),
            ("00\u{1B}[2J", "character 3 of the digits, \"\\u{1B}\" (U+001B), is not an ASCII digit"),
            ("00\u{9B}2J", "character 3 of the digits, \"\\u{9B}\" (U+009B), is not an ASCII digit"),
            ("00\u{202E}", "character 3 of the digits, \"\\u{202E}\" (U+202E), is not an ASCII digit"),
            ("00\u{85}", "character 3 of the digits, \"\\u{85}\" (U+0085), is not an ASCII digit"),
            ("00\\", "character 3 of the digits, \"\\\\\" (U+005C), is not an ASCII digit"),
          ])
    func nonDigitNamed(_ digits: String, _ expected: String) {
        let error = #expect(throws: HybridError(.invalidDigits)) { try Digits.decode(digits) }
        #expect(error?.reason.hasPrefix(expected) == true, "\(String(describing: error?.reason))")
        #expect(error?.reason.contains("trailing whitespace") == expected.contains("trailing whitespace"))
    }
}
