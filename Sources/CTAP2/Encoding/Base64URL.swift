/// Base64url (RFC 4648 §5), the encoding of WebAuthn JSON, stored credentials and caBLE contact IDs.
///
/// The one padding rule of the project: **we always write unpadded text** (WebAuthn §5.10 and
/// Chromium `GetContactURL` do), and we accept:
/// - ``decode(_:)`` (JSON members a relying party or a file may hold): unpadded text, or text padded
///   with `=` to a multiple of four characters, as some servers' encoders write it;
/// - ``decodeUnpadded(_:)`` (identifiers in tunnel-service paths and headers, clientData challenges):
///   unpadded text only, since a second spelling of the same bytes must not name the same thing.
///
/// Both refuse the standard alphabet's `+` and `/`, any other character, a length that leaves one
/// character over, and non-zero leftover bits (which would let two texts decode to the same bytes).
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Encodes bytes as base64url without `=` padding.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let bytes = Array(bytes)
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index < bytes.count {
            let count = min(3, bytes.count - index)
            var value: UInt32 = 0
            for offset in 0..<count { value |= UInt32(bytes[index + offset]) << (16 - 8 * UInt32(offset)) }
            for position in 0...count { out.append(alphabet[Int((value >> (18 - 6 * UInt32(position))) & 0x3F)]) }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes unpadded base64url, or text `=`-padded to a multiple of four; `nil` for anything else.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var utf8 = Array(text.utf8)
        if utf8.last == UInt8(ascii: "=") {
            guard utf8.count % 4 == 0 else { return nil }
            let unpadded = utf8.count - (utf8.reversed().prefix { $0 == UInt8(ascii: "=") }).count
            // At most two `=`, and never a whole group of them.
            guard utf8.count - unpadded <= 2 else { return nil }
            utf8.removeLast(utf8.count - unpadded)
        }
        return decodeUnpadded(utf8)
    }

    /// Decodes unpadded canonical base64url only; `nil` for anything else (padding included).
    public static func decodeUnpadded(_ text: some StringProtocol) -> [UInt8]? {
        decodeUnpadded(Array(text.utf8))
    }

    private static func decodeUnpadded(_ utf8: [UInt8]) -> [UInt8]? {
        guard utf8.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for character in utf8 {
            guard let value = sextet(character) else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        guard accumulator == 0 else { return nil }
        return out
    }

    private static func sextet(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return c - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return c - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): return 62
        case UInt8(ascii: "_"): return 63
        default: return nil
        }
    }
}
