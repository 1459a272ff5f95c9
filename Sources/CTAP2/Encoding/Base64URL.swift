import Foundation

/// Unpadded base64url (RFC 4648 §5), the encoding WebAuthn JSON and caBLE contact URLs use.
public enum Base64URL {
    /// Encodes bytes as base64url without `=` padding.
    public static func encode<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Decodes base64url, with or without padding. Returns `nil` for anything else
    /// (including standard-alphabet `+` and `/`).
    public static func decode(_ string: String) -> [UInt8]? {
        guard string.utf8.allSatisfy({ isAlphabet($0) || $0 == UInt8(ascii: "=") }) else { return nil }
        var standard = string.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard = standard.replacingOccurrences(of: "=", with: "")
        guard standard.utf8.count % 4 != 1 else { return nil }
        standard += String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4)
        return Data(base64Encoded: standard).map { [UInt8]($0) }
    }

    private static func isAlphabet(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            return true
        default:
            return false
        }
    }
}
