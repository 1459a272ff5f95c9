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

    /// Why ``decode(_:)`` refuses `text`, in words (`nil` when it decodes): the standard alphabet's
    /// `+` or `/`, another character outside base64url, `=` inside or more than two at the end,
    /// padding that does not make a multiple of four, a length that leaves one character over, or
    /// non-zero leftover bits in the last character (lenient decoders drop them; refusing them keeps
    /// one text for one byte string). For error messages that say what is wrong with a member.
    public static func problem(with text: some StringProtocol) -> String? {
        guard decode(text) == nil else { return nil }
        let scalars = Array(text.unicodeScalars)
        let padding = scalars.reversed().prefix { $0 == "=" }.count
        let body = scalars.dropLast(padding)
        if body.contains("+") || body.contains("/") { return "it uses standard base64's + or /" }
        if let other = body.first(where: { !$0.isASCII || sextet(UInt8($0.value)) == nil }) {
            if other == "=" { return "it holds = before its end" }
            return "it holds a character outside base64url (U+\(String(other.value, radix: 16, uppercase: true)))"
        }
        if body.count % 4 == 1 { return "its length leaves one character over" }
        if padding > 2 { return "it ends in more than two =" }
        if padding > 0, scalars.count % 4 != 0 { return "its = padding does not make a multiple of four characters" }
        return "its last character carries non-zero leftover bits (a non-canonical encoding)"
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
