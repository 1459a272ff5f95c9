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
