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
                "\(WebAuthnJSONCoding.path(decoder.codingPath)) is not base64url (\"\(shown)\"): \(Base64URL.problem(with: text) ?? "")")
        }
        self.bytes = bytes
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(Base64URL.encode(bytes))
    }

    /// The unpadded base64url text.
    public var description: String { Base64URL.encode(bytes) }
}
