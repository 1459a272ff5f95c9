import CTAP2
import Foundation

/// The strict first steps of reading every JSON file the programs keep (the stores,
/// `phone-link.json`, the relay's contact file; Docs/STORES.md, "Loading"): the syntax, a top-level
/// object, and an integer `version`.
///
/// Syntax is checked with `JSONSerialization` (its messages give the position), then by the
/// package's strict reader (repeated members, nesting, UTF-8), so a member given twice is refused
/// rather than one of its values silently winning.
enum StoreJSON {
    /// The top-level object of the file `path` holding `bytes`: its members as `JSONSerialization`
    /// gives them (to keep unknown ones on rewrite) and as the strict reader read them.
    /// - Throws: ``StoreError`` `notJSON` (not JSON, a UTF-8 byte-order mark, a repeated member, too deep) or
    ///   `invalidDocument` (the top level is not an object).
    static func object(_ bytes: [UInt8], path: String) throws(StoreError) -> (
        members: [String: Any], fields: [(name: String, value: JSONReader.Value)]
    ) {
        guard !bytes.starts(with: [0xEF, 0xBB, 0xBF]) else {
            // An editor's addition JSON does not allow (RFC 8259 §8.1); named, not "unexpected character 0xef".
            throw StoreError(
                .notJSON, path: path, "it begins with a UTF-8 byte-order mark (EF BB BF), which a store must not have: remove those 3 bytes")
        }
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
        } catch {
            let detail = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "\(error)"
            throw StoreError(.notJSON, path: path, abbreviatingNumbers(detail))
        }
        // What JSONSerialization lets through: a repeated member (the last would win), nesting
        // without a useful bound, bytes that are not UTF-8. The strict reader names them.
        let strict: JSONReader.Value
        do {
            // No subject: the store error's own summary says "not JSON".
            strict = try JSONReader.parse(bytes, maxDepth: JSONValue.maxDepth, subject: "")
        } catch {
            throw StoreError(.notJSON, path: path, error.reason)
        }
        guard let members = object as? [String: Any], case .object(let fields) = strict else {
            throw StoreError(.invalidDocument, path: path, "the top level is not a JSON object")
        }
        return (members, fields)
    }

    /// The integer `version` member among `fields` of the file `path`.
    /// - Throws: ``StoreError`` `unsupportedVersion` when it is missing, not an integer (`1.0`
    ///   included: the formats say "the integer") or out of range.
    static func version(_ fields: [(name: String, value: JSONReader.Value)], path: String) throws(StoreError) -> Int {
        guard let value = fields.first(where: { $0.name == "version" })?.value else {
            throw StoreError(.unsupportedVersion, path: path, "no \"version\" member")
        }
        guard case .number(let text) = value else {
            throw StoreError(.unsupportedVersion, path: path, "\"version\" is not an integer")
        }
        guard text.allSatisfy(\.isNumber) else {
            throw StoreError(.unsupportedVersion, path: path, abbreviatingNumbers("\"version\" is not an integer (\(text))"))
        }
        guard let version = Int(text) else {
            throw StoreError(.unsupportedVersion, path: path, abbreviatingNumbers("\"version\" \(text) is out of range"))
        }
        return version
    }

    /// `message` with each number longer than 24 characters cut to its first 16 and its length:
    /// Foundation quotes a number it cannot represent whole, however long the file made it.
    static func abbreviatingNumbers(_ message: String) -> String {
        message.replacing(/[0-9][0-9.eE+\-]{24,}/) { match in
            "\(match.output.prefix(16))…, \(match.output.count) characters"
        }
    }
}

extension StoreJSON {
    /// `members` (a store file's top-level object as `JSONSerialization` reads it, known members
    /// merged in) as the file's bytes: pretty-printed, keys in byte order, slashes unescaped, and a
    /// final line feed.
    ///
    /// Written with `JSONEncoder`, not `JSONSerialization.data(withJSONObject:)`, whose sorted keys
    /// compare every pair through ICU's collator: for a store of 2,000 credentials that sort took
    /// about 0.4 s of each save, the encoder 0.04 s. The bytes are the same but for two things: keys
    /// that differ in case or by digits sort in byte order (`Zeta` before `_x` before `alpha`), not
    /// case-insensitively in the system locale, and a fraction in an unknown member is written as the
    /// shortest text of its double.
    static func bytes(_ members: [String: Any]) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(Member(members))) + [UInt8(ascii: "\n")]
    }

    /// One value of a `JSONSerialization` tree, encoded as it was read (an integer stays an integer,
    /// `true` a Boolean, not the number 1).
    private struct Member: Encodable {
        let value: Any

        init(_ value: Any) {
            self.value = value
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch value {
            case let text as String:
                try container.encode(text)
            case let object as [String: Any]:
                try container.encode(object.mapValues(Member.init))
            case let array as [Any]:
                try container.encode(array.map(Member.init))
            case let number as NSNumber:
                // Its type as JSONSerialization made it: "c" a Boolean, "d" a fraction, "Q" an
                // integer beyond Int64, else an integer.
                switch String(cString: number.objCType) {
                case "c", "B": try container.encode(number.boolValue)
                case "d", "f": try container.encode(number.doubleValue)
                case "Q": try container.encode(number.uint64Value)
                default: try container.encode(number.int64Value)
                }
            case is NSNull:
                try container.encodeNil()
            default:
                throw EncodingError.invalidValue(
                    value, EncodingError.Context(codingPath: encoder.codingPath, debugDescription: "not a JSON value: \(type(of: value))"))
            }
        }
    }
}
