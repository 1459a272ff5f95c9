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
