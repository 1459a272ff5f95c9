import HybridRuntime

/// How a `Decodable` failure is told to people, the same way for options documents and stores:
/// where (`passkeys[2].privateKey`) and what JSON kind was wanted ("a string", "a whole number").
enum DecodingWords {
    /// A coding path as a member path: `allowCredentials[0].id`; empty for the top level.
    static func path(_ codingPath: [any CodingKey]) -> String {
        codingPath.reduce(into: "") { out, key in
            if let index = key.intValue {
                out += "[\(index)]"
            } else {
                out += out.isEmpty ? key.stringValue : ".\(key.stringValue)"
            }
        }
    }

    /// The JSON kind a decoder wanted for `type`, in words.
    static func kind(_ type: Any.Type) -> String {
        if type == String.self || type == Base64URLBytes.self { return "a string" }
        if type == Bool.self { return "a boolean" }
        if type is any BinaryInteger.Type { return "a whole number" }
        if type is any BinaryFloatingPoint.Type { return "a number" }
        if String(describing: type).hasPrefix("Array") { return "an array" }
        return "an object"
    }

    /// Reads a string enumeration's value; one it does not have is refused in words that list the
    /// allowed ones (`"weird" is not one of bare, publicKey, options, forgeRock`), where the
    /// synthesized decoder says "Cannot initialize WebAuthnOptionsShape from invalid String value weird".
    static func enumeration<T: RawRepresentable & CaseIterable>(
        _ type: T.Type, from decoder: any Decoder
    ) throws -> T where T.RawValue == String {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let value = T(rawValue: text) else {
            let allowed = T.allCases.map(\.rawValue).joined(separator: ", ")
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "\"\(PeerText.printable(text, limit: 40))\" is not one of \(allowed)")
        }
        return value
    }

    /// A decoding failure as one line: the member path and what was wrong (`identity.name: missing`).
    static func describe(_ error: DecodingError) -> String {
        switch error {
        case .keyNotFound(let key, _): return "\(key.stringValue): missing"
        case .typeMismatch(let type, let context):
            return "\(DecodingWords.path(context.codingPath)): wrong type: \(DecodingWords.kind(type)) is required"
        case .valueNotFound(let type, let context):
            return "\(DecodingWords.path(context.codingPath)): null, where \(DecodingWords.kind(type)) is required"
        case .dataCorrupted(let context):
            let at = DecodingWords.path(context.codingPath)
            return at.isEmpty ? context.debugDescription : "\(at): \(context.debugDescription)"
        @unknown default: return "\(error)"
        }
    }
}
