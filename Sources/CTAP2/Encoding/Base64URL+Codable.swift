/// Byte strings stored as unpadded base64url text in JSON (passkey and credential stores).
extension KeyedDecodingContainer {
    /// Decodes a base64url string into bytes; a value that is not base64url is a `DecodingError`.
    package func decodeBase64URL(forKey key: Key) throws -> [UInt8] {
        let text = try decode(String.self, forKey: key)
        guard let bytes = Base64URL.decode(text) else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "not base64url")
        }
        return bytes
    }
}

extension KeyedEncodingContainer {
    /// Encodes bytes as an unpadded base64url string.
    package mutating func encodeBase64URL(_ bytes: [UInt8], forKey key: Key) throws {
        try encode(Base64URL.encode(bytes), forKey: key)
    }
}
