import Foundation

/// How WebAuthn JSON is read and written here.
///
/// - Reading maps `DecodingError` to ``WebAuthnJSONError`` with the member's path
///   (`authenticatorSelection.userVerification`), so a relying party's developer sees which member
///   is wrong. Unknown members are ignored, as WebAuthn dictionaries ignore them.
/// - Writing uses `JSONEncoder` with `.sortedKeys` (and unescaped slashes): the key order is stable
///   and alphabetical at every level, so the same credential always prints the same bytes and
///   tests can compare output. WebAuthn JSON consumers do not depend on member order.
package enum WebAuthnJSONCoding {
    /// Decodes `T` from UTF-8 JSON.
    package static func decode<T: Decodable>(_ type: T.Type, from json: some Collection<UInt8>) throws(WebAuthnJSONError) -> T {
        do {
            return try JSONDecoder().decode(T.self, from: Data(json))
        } catch let error as WebAuthnJSONError {
            throw error
        } catch let error as DecodingError {
            throw map(error, json: Data(json))
        } catch {
            throw WebAuthnJSONError(.invalidJSON, "\(error)")
        }
    }

    /// Encodes a value as compact (or pretty-printed) JSON with sorted keys.
    ///
    /// Only used for this module's own types, whose encoding cannot fail.
    package static func encode(_ value: some Encodable, prettyPrinted: Bool = false) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting =
            prettyPrinted
            ? [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted] : [.sortedKeys, .withoutEscapingSlashes]
        do {
            return try encoder.encode(value)
        } catch {
            preconditionFailure("encoding WebAuthn JSON of strings and numbers cannot fail: \(error)")
        }
    }

    /// A coding path as a member path: `allowCredentials[0].id`.
    package static func path(_ codingPath: [any CodingKey]) -> String {
        let path = DecodingWords.path(codingPath)
        return path.isEmpty ? "the document" : path
    }

    private static func map(_ error: DecodingError, json: Data) -> WebAuthnJSONError {
        switch error {
        case .keyNotFound(let key, let context):
            let member = path(context.codingPath + [key])
            if isChallenge(member) {
                return WebAuthnJSONError(.missingChallenge, "the options have no \"\(member)\"")
            }
            return WebAuthnJSONError(.missingMember, "\(member) is required")
        case .valueNotFound(_, let context):
            let member = path(context.codingPath)
            if isChallenge(member) { return WebAuthnJSONError(.missingChallenge, "\"\(member)\" is null") }
            return WebAuthnJSONError(.wrongType, "\(member) must not be null")
        case .typeMismatch(let type, let context):
            if context.codingPath.isEmpty {
                return WebAuthnJSONError(.invalidJSON, "expected a JSON object at the top level")
            }
            return WebAuthnJSONError(.wrongType, "\(path(context.codingPath)) must be \(DecodingWords.kind(type))")
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty {
                // Foundation reports syntax errors and out-of-range numbers alike, without a
                // position; JSONSerialization tells them apart and says where.
                do {
                    _ = try JSONSerialization.jsonObject(with: json, options: [.fragmentsAllowed])
                } catch {
                    let detail = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String
                    return WebAuthnJSONError(.invalidJSON, detail ?? context.debugDescription)
                }
                return WebAuthnJSONError(
                    .invalidValue, "a number is out of range or not an integer, or a value is malformed")
            }
            return WebAuthnJSONError(.invalidValue, "\(path(context.codingPath)): \(context.debugDescription)")
        @unknown default:
            return WebAuthnJSONError(.invalidJSON, "\(error)")
        }
    }

    /// The options' challenge, bare or inside a `publicKey` / `options` wrapper.
    private static func isChallenge(_ member: String) -> Bool {
        ["challenge", "publicKey.challenge", "options.challenge"].contains(member)
    }
}
