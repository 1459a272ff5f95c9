/// Hexadecimal encoding of byte strings, as used by vectors, URLs and logs.
///
/// caBLE URLs use upper-case hex (Chromium `base::HexEncode`); vectors use lower case.
public enum Hex {
    /// Why a hex string was rejected.
    public enum DecodingError: Error, Hashable, Sendable {
        /// The string has an odd number of characters.
        case oddLength
        /// A character at this offset is not `0-9a-fA-F`.
        case invalidCharacter(offset: Int)
    }

    /// Encodes bytes as hex, lower case unless `uppercase` is set.
    public static func encode<Bytes: Sequence<UInt8>>(_ bytes: Bytes, uppercase: Bool = false) -> String {
        if let encoded = bytes.withContiguousStorageIfAvailable({ encode(buffer: $0, uppercase: uppercase) }) {
            return encoded
        }
        return Array(bytes).withUnsafeBufferPointer { encode(buffer: $0, uppercase: uppercase) }
    }

    private static func encode(buffer: UnsafeBufferPointer<UInt8>, uppercase: Bool) -> String {
        guard !buffer.isEmpty else { return "" }
        let letters = (uppercase ? UInt8(ascii: "A") : UInt8(ascii: "a")) &- 10
        return String(unsafeUninitializedCapacity: buffer.count * 2) { out in
            var index = 0
            for byte in buffer {
                let high = byte >> 4, low = byte & 0x0F
                out[index] = high < 10 ? high &+ UInt8(ascii: "0") : high &+ letters
                out[index + 1] = low < 10 ? low &+ UInt8(ascii: "0") : low &+ letters
                index += 2
            }
            return index
        }
    }

    /// Decodes a hex string (either case). Throws ``DecodingError``.
    public static func decode(_ string: some StringProtocol) throws(DecodingError) -> [UInt8] {
        let utf8 = Array(string.utf8)
        guard utf8.count % 2 == 0 else { throw .oddLength }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = nibble(utf8[index]) else { throw .invalidCharacter(offset: index) }
            guard let low = nibble(utf8[index + 1]) else { throw .invalidCharacter(offset: index + 1) }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    /// Decodes exactly `byteCount` bytes of hex (either case), or `nil` for any other length or a
    /// character that is not hex (the strict form tunnel-service paths and headers use).
    public static func decode(_ string: some StringProtocol, byteCount: Int) -> [UInt8]? {
        decode(ascii: string.utf8, byteCount: byteCount)
    }

    /// Decodes exactly `byteCount` bytes from hex digits given as ASCII bytes (either case), or `nil`
    /// for any other length or a byte that is not a hex digit: ``decode(_:byteCount:)`` for callers
    /// that hold bytes (a request target), inlined so it is specialized for their collection. (The
    /// strict decoding of both; ``decode(_:)`` says where a string went wrong.)
    @inlinable
    public static func decode(ascii digits: some Collection<UInt8>, byteCount: Int) -> [UInt8]? {
        guard digits.count == byteCount * 2 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(byteCount)
        var index = digits.startIndex
        while index != digits.endIndex {
            let next = digits.index(after: index)
            guard let high = nibble(digits[index]), let low = nibble(digits[next]) else { return nil }
            out.append(high << 4 | low)
            index = digits.index(after: next)
        }
        return out
    }

    @usableFromInline
    static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
