/// The decimal encoding of the QR payload (Chromium `BytesToDigits` / `DigitsToBytes`).
///
/// Bytes go in 7-byte chunks, each read as a little-endian integer and printed as 17 zero-padded
/// digits; a final partial chunk of n bytes takes 3, 5, 8, 10, 13 or 15 digits. QR numeric mode
/// stores digits far more densely than byte mode, which is why the scheme exists.
public enum Digits {
    private static let chunkSize = 7
    private static let chunkDigits = 17
    /// Digits for a partial chunk of n bytes (index n), 0 for impossible sizes.
    private static let partialChunkDigits = [0, 3, 5, 8, 10, 13, 15]
    /// How groups are written, for the errors: an encoder that drops the leading zeros, or cuts the
    /// digits another way, breaks it.
    private static let widthRule =
        "every 7 bytes are one little-endian number written as 17 digits with leading zeros; a final 1-6 bytes as 3, 5, 8, 10, 13 or 15"

    /// Encodes bytes as digits.
    public static func encode(_ bytes: [UInt8]) -> String {
        var out = ""
        out.reserveCapacity((bytes.count / chunkSize + 1) * chunkDigits)
        var index = 0
        while index < bytes.count {
            let end = min(index + chunkSize, bytes.count)
            var value: UInt64 = 0
            for (shift, byte) in bytes[index..<end].enumerated() {
                value |= UInt64(byte) << UInt64(8 * shift)
            }
            let width = end - index == chunkSize ? chunkDigits : partialChunkDigits[end - index]
            let digits = String(value)
            out += String(repeating: "0", count: width - digits.count) + digits
            index = end
        }
        return out
    }

    /// Decodes digits. Throws ``HybridError/Code/invalidDigits`` for non-ASCII-digit characters,
    /// a remainder length that no chunk size produces, or a chunk value too large for its bytes.
    public static func decode(_ digits: some StringProtocol) throws(HybridError) -> [UInt8] {
        let utf8 = Array(digits.utf8)
        if let offset = utf8.firstIndex(where: { $0 < UInt8(ascii: "0") || $0 > UInt8(ascii: "9") }) {
            throw HybridError(.invalidDigits, notADigit(String(decoding: utf8[offset...], as: UTF8.self), position: offset + 1))
        }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            let remaining = utf8.count - index
            let width: Int
            let byteCount: Int
            if remaining >= chunkDigits {
                width = chunkDigits
                byteCount = chunkSize
            } else if let n = partialChunkDigits.firstIndex(of: remaining), n > 0 {
                width = remaining
                byteCount = n
            } else {
                throw HybridError(
                    .invalidDigits,
                    "a final group of \(remaining) digits encodes no whole number of bytes (\(Self.widthRule))")
            }
            var value: UInt64 = 0
            for digit in utf8[index..<index + width] {
                value = value * 10 + UInt64(digit - UInt8(ascii: "0"))  // ≤ 17 digits: no overflow
            }
            guard value >> UInt64(8 * byteCount) == 0 else {
                throw HybridError(
                    .invalidDigits, "digit group \(index / chunkDigits) is out of range for \(byteCount) bytes (\(Self.widthRule))")
            }
            for shift in 0..<byteCount {
                out.append(UInt8(truncatingIfNeeded: value >> UInt64(8 * shift)))
            }
            index += width
        }
        return out
    }

    /// The reason for a character that is not an ASCII digit at `position` (1-based; every
    /// character before it is a digit), `rest` the text from it on: the character quoted with
    /// ``HiddenCharacters/escaped(_:keeping:escapingBackslash:limit:)`` (a code's C1 CSI or bidi
    /// override cannot act on the terminal that shows the error), and when only whitespace or
    /// NULs follow, that the digits carry trailing whitespace (the usual cause: a scanner app or a
    /// copy that kept the line break) or NUL characters, naming which.
    private static func notADigit(_ rest: String, position: Int) -> String {
        let character = rest.unicodeScalars.first.map { "\(quote($0)) (U+\(hex($0.value)))" } ?? "?"
        let trailing = rest.unicodeScalars.allSatisfy { " \t\n\r\u{0B}\u{0C}\0".unicodeScalars.contains($0) }
        guard trailing else { return "character \(position) of the digits, \(character), is not an ASCII digit" }
        let nuls = rest.unicodeScalars.contains("\0")
        let blanks = rest.unicodeScalars.contains { $0 != "\0" }
        let what = nuls ? (blanks ? "whitespace and NUL characters" : "NUL characters") : "whitespace"
        return "character \(position) of the digits, \(character), is not an ASCII digit: the digits end in trailing \(what) "
            + "\(quote(rest, limit: 8)), which Chromium refuses too; remove it"
    }

    /// `text` in double quotes, its hidden characters and backslashes escaped, at most `limit`
    /// characters of it.
    private static func quote(_ text: some StringProtocol, limit: Int? = nil) -> String {
        "\"" + HiddenCharacters.escaped(text, escapingBackslash: true, limit: limit) + "\""
    }

    /// One character in double quotes, escaped as ``quote(_:limit:)`` does.
    private static func quote(_ scalar: Unicode.Scalar) -> String { quote(String(scalar)) }

    /// `value` as at least four upper-case hex digits.
    private static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}
