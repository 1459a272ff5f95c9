import CTAP2

/// Bytes that WebAuthn JSON carries as a `Base64URLString` (WebAuthn L3 §5.1.1 JSON serialization):
/// encoded as unpadded base64url; decoded from base64url with or without `=` padding.
///
/// Decoding anything else throws ``WebAuthnJSONError/Code/invalidBase64URL`` naming the member
/// (`user.id`, `allowCredentials[1].id`), straight out of `JSONDecoder`.
public struct Base64URLBytes: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The bytes.
    public var bytes: [UInt8]

    /// Wraps bytes.
    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let bytes = Base64URL.decode(text) else {
            let shown = text.count > 24 ? String(text.prefix(24)) + "…" : text
            throw WebAuthnJSONError(
                .invalidBase64URL,
                "\(WebAuthnJSONCoding.path(decoder.codingPath)) is not base64url (\"\(shown)\"): \(Self.problem(with: text))")
        }
        self.bytes = bytes
    }

    /// Why `text` is not base64url as ``Base64URL/decode(_:)`` reads it, in words.
    static func problem(with text: String) -> String {
        let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let unpadded = text.reversed().drop { $0 == "=" }.reversed()
        if text.contains("+") || text.contains("/") { return "it uses standard base64's + or /" }
        if let other = unpadded.first(where: { !alphabet.contains($0) }) {
            return "it holds \(other == "=" ? "= before its end" : "a character outside base64url (\(other.unicodeScalars.map { "U+\(String($0.value, radix: 16, uppercase: true))" }.joined()))")"
        }
        if unpadded.count % 4 == 1 { return "its length leaves one character over" }
        let padding = text.count - unpadded.count
        if padding > 2 { return "it ends in more than two =" }
        if padding > 0, text.count % 4 != 0 { return "its = padding does not make a multiple of four characters" }
        // What is left: the last character's unused low bits are not zero. Lenient decoders drop
        // them; we refuse, so that one text always means one byte string (Docs/PROTOCOL-TOLERANCE.md).
        return "its last character carries non-zero leftover bits (a non-canonical encoding)"
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(Base64URL.encode(bytes))
    }

    /// The unpadded base64url text.
    public var description: String { Base64URL.encode(bytes) }
}
