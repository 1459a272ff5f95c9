import CTAP2
import Foundation
import HybridRuntime

/// Any JSON value, for profile templates and the bodies relying-party servers send and expect.
public enum JSONValue: Sendable, Hashable, Codable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// Any JSON number, as a `Double`.
    case number(Double)
    /// A string.
    case string(String)
    /// An array, in order.
    case array([JSONValue])
    /// An object; member order is not kept.
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let flag = try? container.decode(Bool.self) {
            self = .bool(flag)
        } else if let number = try? container.decode(Double.self) {
            self = .number(number)
        } else if let text = try? container.decode(String.self) {
            self = .string(text)
        } else if let array = try? container.decode([JSONValue].self) {
            self = .array(array)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let flag): try container.encode(flag)
        case .number(let number):
            if number == number.rounded(), abs(number) < 1e15 { try container.encode(Int64(number)) } else { try container.encode(number) }
        case .string(let text): try container.encode(text)
        case .array(let array): try container.encode(array)
        case .object(let object): try container.encode(object)
        }
    }

    /// The deepest nesting of arrays and objects ``parse(_:)`` accepts: relying-party documents
    /// nest about six deep.
    public static let maxDepth = 32

    /// `json` without a leading UTF-8 byte-order mark (EF BB BF), which a browser's `response.json()`
    /// drops (WHATWG Encoding's "UTF-8 decode") and some servers and Windows editors write: for
    /// bodies a relying party sends, before they are parsed.
    static func withoutByteOrderMark<C: Collection<UInt8>>(_ json: C) -> C.SubSequence {
        json.starts(with: [0xEF, 0xBB, 0xBF]) ? json.dropFirst(3) : json[...]
    }

    /// Parses UTF-8 JSON; `nil` when it is not JSON, nests deeper than ``maxDepth``, repeats a
    /// member name, or holds a number beyond `Double`.
    ///
    /// Bodies come from the network (a relying party's, or a client's of `hybrid-sim rp`), so this
    /// uses the package's strict reader, linear in the input, rather than `Decodable`'s trial of
    /// each type at every level, which takes seconds to minutes for a small, deeply nested body.
    public static func parse(_ bytes: some Collection<UInt8>) -> JSONValue? {
        try? read(bytes)
    }

    /// ``parse(_:)``, saying why not: the reader's complaint with its offset (`subject` begins it:
    /// "not JSON: duplicate member \"rpId\" at offset 40"), a number beyond `Double`, or two member
    /// names that are one text in two Unicode spellings.
    static func read(_ bytes: some Collection<UInt8>, subject: String = "JSON") throws(CTAP2Error) -> JSONValue {
        let value = try JSONReader.parse(bytes, maxDepth: maxDepth, subject: subject)
        do {
            return try JSONValue(reading: value)
        } catch {
            throw CTAP2Error(.invalidJSON, "\(subject): \(error.problem)")
        }
    }

    /// Why the reader's value is no `JSONValue`.
    private struct Unrepresentable: Error {
        let problem: String
    }

    /// The reader's value as a `JSONValue`.
    private init(reading value: JSONReader.Value) throws(Unrepresentable) {
        switch value {
        case .null: self = .null
        case .bool(let flag): self = .bool(flag)
        case .string(let text): self = .string(text)
        case .number(let text):
            guard let number = Double(text), number.isFinite else { throw Unrepresentable(problem: "a number beyond what a double holds") }
            self = .number(number)
        case .array(let elements):
            var array: [JSONValue] = []
            array.reserveCapacity(elements.count)
            for element in elements { array.append(try JSONValue(reading: element)) }
            self = .array(array)
        case .object(let members):
            var object: [String: JSONValue] = [:]
            for member in members {
                // The reader tells repeated names apart by their bytes; Swift's strings compare by
                // canonical equivalence ("é" composed and decomposed, the Kelvin sign and "K"), so
                // two such names would become one here, the last winning, and a reader that keeps
                // the first (JSONDecoder) would see the other: refused, as a repeat.
                guard object.updateValue(try JSONValue(reading: member.value), forKey: member.name) == nil else {
                    throw Unrepresentable(
                        problem: "member \"\(PeerText.printable(member.name, limit: 64))\" is repeated in another Unicode spelling of the same name")
                }
            }
            self = .object(object)
        }
    }

    /// Compact JSON with sorted keys.
    public var data: Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)) ?? Data("null".utf8)
    }

    /// The compact text.
    public var text: String { String(decoding: data, as: UTF8.self) }

    /// A short description for an error message, made without serialising the value (a body of a
    /// million members would take longer to write out than to parse): a scalar's JSON text (a string
    /// cut to 40 characters), or the kind and size of an array or object (`an array of 3 values`).
    var brief: String {
        switch self {
        case .null: return "null"
        case .bool(let flag): return flag ? "true" : "false"
        case .number: return text
        case .string(let string):
            let cut = string.count > 40 ? String(string.prefix(40)) + "…" : string
            return JSONValue.string(cut).text
        case .array(let array): return "an array of \(array.count) value\(array.count == 1 ? "" : "s")"
        case .object(let object): return "an object of \(object.count) member\(object.count == 1 ? "" : "s")"
        }
    }

    /// The member `key` of an object.
    public subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    /// The string, when this is one.
    public var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// The object, when this is one.
    public var objectValue: [String: JSONValue]? {
        if case .object(let object) = self { return object }
        return nil
    }

    /// Replaces every string that is exactly `{name}` by `values[name]` (any JSON value), and
    /// `{name}` inside longer strings by the value's text (strings only).
    ///
    /// - Throws: the name of a placeholder with no value.
    public func substituting(_ values: [String: JSONValue]) throws(JSONTemplateError) -> JSONValue {
        switch self {
        case .string(let text):
            if text.hasPrefix("{"), text.hasSuffix("}"), let value = values[String(text.dropFirst().dropLast())] {
                return value
            }
            return .string(try Self.substitute(in: text, values))
        case .array(let array):
            var out: [JSONValue] = []
            for element in array { out.append(try element.substituting(values)) }
            return .array(out)
        case .object(let object):
            var out: [String: JSONValue] = [:]
            for (key, value) in object { out[key] = try value.substituting(values) }
            return .object(out)
        default:
            return self
        }
    }

    /// Replaces `{name}` placeholders in a string with string values (percent-encoding them when
    /// `forURL`). Unknown `{…}` text is an error.
    static func substitute(
        in text: String, _ values: [String: JSONValue], forURL: Bool = false
    ) throws(JSONTemplateError) -> String {
        var out = ""
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "{") {
            out += rest[..<open]
            guard let close = rest[open...].firstIndex(of: "}") else { break }
            let name = String(rest[rest.index(after: open)..<close])
            guard let value = values[name]?.stringValue else { throw JSONTemplateError(placeholder: name) }
            out += forURL ? (value.addingPercentEncoding(withAllowedCharacters: .urlQueryValueAllowed) ?? value) : value
            rest = rest[rest.index(after: close)...]
        }
        return out + rest
    }

    /// The `{name}` placeholders used anywhere in this template.
    var placeholders: Set<String> {
        switch self {
        case .string(let text): return Self.placeholders(in: text)
        case .array(let array): return array.reduce(into: []) { $0.formUnion($1.placeholders) }
        case .object(let object): return object.values.reduce(into: []) { $0.formUnion($1.placeholders) }
        default: return []
        }
    }

    static func placeholders(in text: String) -> Set<String> {
        var names: Set<String> = []
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            names.insert(String(rest[rest.index(after: open)..<close]))
            rest = rest[rest.index(after: close)...]
        }
        return names
    }
}

/// A profile template names a placeholder this ceremony has no value for.
public struct JSONTemplateError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The placeholder, without braces.
    public var placeholder: String
    public var description: String { "no value for the placeholder {\(placeholder)}" }
}

extension CharacterSet {
    /// Characters left as they are in a query value.
    static let urlQueryValueAllowed: CharacterSet = {
        var set = CharacterSet.urlQueryAllowed
        set.remove(charactersIn: "&=+?#")
        return set
    }()
}
