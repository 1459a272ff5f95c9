import CTAP2

/// A decoded CBOR item as `inspect --json` writes it, for tools that read the decrypted messages
/// without a CBOR decoder of their own (Docs/INSPECT.md, "JSON").
///
/// In JSON: an integer is a number (beyond 64 bits `{"integer":"DECIMAL"}`), a text string a string,
/// an array an array, `true`/`false`/`null` themselves, `undefined` `{"undefined":true}`; a byte
/// string is `{"bytes":"HEX"}`, with `"cbor"` beside it when the bytes are a CBOR item the protocol
/// nests (the post-handshake message's getInfo); a secret not shown (a link secret) is
/// `{"secretBytes":COUNT}`; a map is an object whose keys are the CBOR keys written out (an integer
/// in decimal, `"1"`; a text string as it is). Reading the JSON back, an object whose only members
/// are one of those forms is read as that form.
public indirect enum DecodedCBOR: Sendable, Hashable {
    /// An unsigned or negative integer that fits `Int64`.
    case integer(Int64)
    /// An integer outside `Int64`, in decimal.
    case bigInteger(String)
    /// A byte string; `nested` is the CBOR item the bytes hold when the protocol nests one there
    /// (the post-handshake message's getInfo), else `nil`.
    case bytes([UInt8], nested: DecodedCBOR?)
    /// Bytes not shown (their count).
    case secret(Int)
    /// A text string.
    case text(String)
    /// An array, in order.
    case array([DecodedCBOR])
    /// A map, its keys written out: an integer in decimal (`"1"`), a text string as it is.
    case map([String: DecodedCBOR])
    /// `true` or `false`.
    case bool(Bool)
    /// CBOR `null`.
    case null
    /// CBOR `undefined`.
    case undefined

    /// `value` as it is.
    public init(_ value: CBORValue) {
        switch value {
        case .unsigned(let n): self = n <= UInt64(Int64.max) ? .integer(Int64(n)) : .bigInteger(String(n))
        case .negative(let n): self = n <= UInt64(Int64.max) ? .integer(-1 - Int64(n)) : .bigInteger("-" + String(UInt128(n) + 1))
        case .bytes(let bytes): self = .bytes(bytes, nested: nil)
        case .text(let text): self = .text(text)
        case .array(let items): self = .array(items.map(DecodedCBOR.init))
        case .map(let map):
            // In canonical key order, so that of keys written the same (below) the first in it is kept.
            self = .map(Dictionary(
                CBOR.canonicallySorted(map).map { (Self.key($0.key), DecodedCBOR($0.value)) }, uniquingKeysWith: { first, _ in first }))
        case .bool(let flag): self = .bool(flag)
        case .null: self = .null
        case .undefined: self = .undefined
        }
    }

    /// A map key written out: an integer in decimal, a text string as it is, anything else in
    /// diagnostic notation.
    static func key(_ key: CBORValue) -> String {
        if let number = key.intValue { return String(number) }
        if let text = key.textValue { return text }
        return CBORAnnotation.diagnostic(key)
    }

    /// This map with the member `key` changed by `change` (itself when not a map or no such member).
    func changing(_ key: Int, _ change: (DecodedCBOR) -> DecodedCBOR) -> DecodedCBOR {
        guard case .map(var members) = self, let member = members[String(key)] else { return self }
        members[String(key)] = change(member)
        return .map(members)
    }

    /// A byte string's bytes shown as the CBOR item they hold, when they decode.
    func withNestedCBOR() -> DecodedCBOR {
        guard case .bytes(let bytes, _) = self, let item = try? CBOR.decode(bytes) else { return self }
        return .bytes(bytes, nested: DecodedCBOR(item))
    }

    /// A byte string replaced by its count.
    func hidden() -> DecodedCBOR {
        guard case .bytes(let bytes, _) = self else { return self }
        return .secret(bytes.count)
    }
}

extension DecodedCBOR: Codable {
    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .integer(let number):
            var container = encoder.singleValueContainer()
            try container.encode(number)
        case .text(let text):
            var container = encoder.singleValueContainer()
            try container.encode(text)
        case .bool(let flag):
            var container = encoder.singleValueContainer()
            try container.encode(flag)
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .array(let items):
            var container = encoder.singleValueContainer()
            try container.encode(items)
        case .map(let members):
            var container = encoder.container(keyedBy: Key.self)
            for (key, value) in members { try container.encode(value, forKey: Key(key)) }
        case .bigInteger(let decimal):
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(decimal, forKey: Key("integer"))
        case .bytes(let bytes, let nested):
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(Hex.encode(bytes), forKey: Key("bytes"))
            if let nested { try container.encode(nested, forKey: Key("cbor")) }
        case .secret(let count):
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(count, forKey: Key("secretBytes"))
        case .undefined:
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(true, forKey: Key("undefined"))
        }
    }

    public init(from decoder: any Decoder) throws {
        if let single = try? decoder.singleValueContainer() {
            if single.decodeNil() { self = .null; return }
            if let flag = try? single.decode(Bool.self) { self = .bool(flag); return }
            if let number = try? single.decode(Int64.self) { self = .integer(number); return }
            if let text = try? single.decode(String.self) { self = .text(text); return }
            if let items = try? single.decode([DecodedCBOR].self) { self = .array(items); return }
        }
        let container = try decoder.container(keyedBy: Key.self)
        let keys = Set(container.allKeys.map(\.stringValue))
        if keys == ["bytes"] || keys == ["bytes", "cbor"], let hex = try? container.decode(String.self, forKey: Key("bytes")),
            let bytes = try? Hex.decode(hex)
        {
            self = .bytes(bytes, nested: try container.decodeIfPresent(DecodedCBOR.self, forKey: Key("cbor")))
        } else if keys == ["secretBytes"], let count = try? container.decode(Int.self, forKey: Key("secretBytes")) {
            self = .secret(count)
        } else if keys == ["integer"], let decimal = try? container.decode(String.self, forKey: Key("integer")) {
            self = .bigInteger(decimal)
        } else if keys == ["undefined"], (try? container.decode(Bool.self, forKey: Key("undefined"))) == true {
            self = .undefined
        } else {
            var members: [String: DecodedCBOR] = [:]
            for key in container.allKeys { members[key.stringValue] = try container.decode(DecodedCBOR.self, forKey: key) }
            self = .map(members)
        }
    }
}
