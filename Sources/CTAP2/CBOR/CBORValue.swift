/// A CBOR data item restricted to what CTAP2 uses (CTAP 2.x §8 "Message Encoding"):
/// integers, byte and text strings, arrays, maps, booleans, null and undefined.
/// Tags and floating-point values are not part of the CTAP2 profile and are rejected by the decoder.
///
/// Maps are unordered here; ``CBOR/encode(_:)`` writes them in CTAP2 canonical key order.
public enum CBORValue: Hashable, Sendable {
    /// Major type 0: an unsigned integer.
    case unsigned(UInt64)
    /// Major type 1: the negative integer `-1 - n`.
    case negative(UInt64)
    /// Major type 2: a byte string.
    case bytes([UInt8])
    /// Major type 3: a UTF-8 text string.
    case text(String)
    /// Major type 4: an array.
    case array([CBORValue])
    /// Major type 5: a map. Keys are unique by construction.
    case map([CBORValue: CBORValue])
    /// Simple values 20 and 21.
    case bool(Bool)
    /// Simple value 22.
    case null
    /// Simple value 23.
    case undefined
}

// MARK: - Equality

extension CBORValue {
    /// CBOR's equality (RFC 8949 §2: data items are equal when their encoded forms are), so text
    /// strings are equal when their UTF-8 bytes are. Swift's `String ==` compares canonically
    /// (`"\u{E9}" == "e\u{301}"`), which would make a map holding both spellings of one word as keys
    /// a duplicate-key error and a dictionary lookup find either; a CTAP2 peer compares bytes.
    public static func == (lhs: CBORValue, rhs: CBORValue) -> Bool {
        switch (lhs, rhs) {
        case (.unsigned(let a), .unsigned(let b)): return a == b
        case (.negative(let a), .negative(let b)): return a == b
        case (.bytes(let a), .bytes(let b)): return a == b
        case (.text(let a), .text(let b)): return a.utf8.elementsEqual(b.utf8)
        case (.array(let a), .array(let b)): return a == b
        case (.map(let a), .map(let b)): return a == b
        case (.bool(let a), .bool(let b)): return a == b
        case (.null, .null), (.undefined, .undefined): return true
        default: return false
        }
    }

    /// Hashes what ``==(_:_:)`` compares: a text string's UTF-8 bytes.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .unsigned(let n): hasher.combine(0 as UInt8); hasher.combine(n)
        case .negative(let n): hasher.combine(1 as UInt8); hasher.combine(n)
        case .bytes(let b): hasher.combine(2 as UInt8); hasher.combine(b)
        case .text(let s):
            hasher.combine(3 as UInt8)
            hasher.combine(s.utf8.count)
            for byte in s.utf8 { hasher.combine(byte) }
        case .array(let a): hasher.combine(4 as UInt8); hasher.combine(a)
        case .map(let m): hasher.combine(5 as UInt8); hasher.combine(m)
        case .bool(let b): hasher.combine(6 as UInt8); hasher.combine(b)
        case .null: hasher.combine(7 as UInt8)
        case .undefined: hasher.combine(8 as UInt8)
        }
    }
}

// MARK: - Construction

extension CBORValue {
    /// An integer of either sign.
    public static func int(_ value: Int) -> CBORValue {
        value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-(value + 1)))
    }

    /// An integer of either sign.
    public init(_ value: Int) { self = .int(value) }
}

extension CBORValue: ExpressibleByIntegerLiteral {
    public init(integerLiteral value: Int) { self = .int(value) }
}

extension CBORValue: ExpressibleByStringLiteral {
    public init(stringLiteral value: String) { self = .text(value) }
}

extension CBORValue: ExpressibleByBooleanLiteral {
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension CBORValue: ExpressibleByArrayLiteral {
    public init(arrayLiteral elements: CBORValue...) { self = .array(elements) }
}

extension CBORValue: ExpressibleByDictionaryLiteral {
    /// Builds a map; a repeated key keeps its last value.
    public init(dictionaryLiteral elements: (CBORValue, CBORValue)...) {
        self = .map(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

// MARK: - Access

extension CBORValue {
    /// The value as a signed integer, if it is an integer that fits in `Int`.
    public var intValue: Int? {
        switch self {
        case .unsigned(let n): return n <= UInt64(Int.max) ? Int(n) : nil
        case .negative(let n): return n <= UInt64(Int.max) ? -1 - Int(n) : nil
        default: return nil
        }
    }

    /// The value if it is an unsigned integer.
    public var unsignedValue: UInt64? {
        if case .unsigned(let n) = self { return n }
        return nil
    }

    /// The bytes if this is a byte string.
    public var bytesValue: [UInt8]? {
        if case .bytes(let b) = self { return b }
        return nil
    }

    /// The string if this is a text string.
    public var textValue: String? {
        if case .text(let s) = self { return s }
        return nil
    }

    /// The elements if this is an array.
    public var arrayValue: [CBORValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// The entries if this is a map.
    public var mapValue: [CBORValue: CBORValue]? {
        if case .map(let m) = self { return m }
        return nil
    }

    /// The value if this is `true` or `false`.
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// Looks a key up if this is a map; `nil` for a missing key or a non-map.
    public subscript(key: CBORValue) -> CBORValue? {
        mapValue?[key]
    }

    /// The CBOR major type (0–7) this value encodes with.
    public var majorType: UInt8 {
        switch self {
        case .unsigned: return 0
        case .negative: return 1
        case .bytes: return 2
        case .text: return 3
        case .array: return 4
        case .map: return 5
        case .bool, .null, .undefined: return 7
        }
    }
}

extension CBORValue: CustomStringConvertible {
    /// CBOR diagnostic notation (RFC 8949 §8), handy in test failures and logs.
    public var description: String {
        switch self {
        case .unsigned(let n): return String(n)
        case .negative(let n): return n == .max ? "-18446744073709551616" : "-\(n + 1)"
        case .bytes(let b): return "h'\(Hex.encode(b))'"
        case .text(let s): return "\"\(s)\""
        case .array(let a): return "[" + a.map(\.description).joined(separator: ", ") + "]"
        case .map(let m):
            let entries = CBOR.canonicallySorted(m).map { "\($0.key.description): \($0.value.description)" }
            return "{" + entries.joined(separator: ", ") + "}"
        case .bool(let b): return b ? "true" : "false"
        case .null: return "null"
        case .undefined: return "undefined"
        }
    }
}
