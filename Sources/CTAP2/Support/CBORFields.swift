/// Typed access to the entries of a CBOR map being decoded into a CTAP2 structure.
/// Every failure names the structure and the field (`makeCredential request 0x03 (user): …`).
struct CBORFields {
    /// The entries of the map.
    let entries: [CBORValue: CBORValue]
    /// The structure being decoded, for error reasons.
    let context: String

    /// Opens `value` as a map, or throws ``CTAP2Error/Code/wrongType``.
    init(_ value: CBORValue, context: String) throws(CTAP2Error) {
        guard case .map(let entries) = value else {
            throw CTAP2Error(.wrongType, "\(context): expected a map, found \(value.kindName)")
        }
        self.entries = entries
        self.context = context
    }

    /// The value for a required key, converted by `kind`.
    func required<T>(_ key: CBORValue, _ name: String, _ kind: CBORKind<T>) throws(CTAP2Error) -> T {
        guard let value = entries[key] else {
            throw CTAP2Error(.missingField, "\(context): missing \(label(key, name))")
        }
        return try kind.convert(value, "\(context) \(label(key, name))")
    }

    /// The value for an optional key, converted by `kind`; `nil` when the key is absent.
    func optional<T>(_ key: CBORValue, _ name: String, _ kind: CBORKind<T>) throws(CTAP2Error) -> T? {
        guard let value = entries[key] else { return nil }
        return try kind.convert(value, "\(context) \(label(key, name))")
    }

    private func label(_ key: CBORValue, _ name: String) -> String {
        switch key {
        case .unsigned(let n) where n <= 0xFF: return "0x\(Hex.encode([UInt8(n)])) (\(name))"
        case .unsigned, .negative: return "\(key) (\(name))"
        default: return "\"\(name)\""
        }
    }
}

/// How to convert one CBOR value into a Swift value; `path` names the field for error reasons.
struct CBORKind<T> {
    /// Converts the value or throws.
    let convert: (_ value: CBORValue, _ path: String) throws(CTAP2Error) -> T

    /// A kind that accepts values for which `extract` is non-`nil`, else ``CTAP2Error/Code/wrongType``.
    static func simple(_ expected: String, _ extract: @escaping (CBORValue) -> T?) -> CBORKind<T> {
        CBORKind { (value, path) throws(CTAP2Error) -> T in
            guard let result = extract(value) else {
                throw CTAP2Error(.wrongType, "\(path): expected \(expected), found \(value.kindName)")
            }
            return result
        }
    }
}

extension CBORKind where T == [UInt8] {
    /// A byte string of any length.
    static var bytes: CBORKind<[UInt8]> { .simple("a byte string", \.bytesValue) }

    /// A byte string of exactly `count` bytes.
    static func bytes(count: Int) -> CBORKind<[UInt8]> {
        CBORKind { (value, path) throws(CTAP2Error) -> [UInt8] in
            let bytes = try CBORKind.bytes.convert(value, path)
            guard bytes.count == count else {
                throw CTAP2Error(.invalidLength, "\(path): expected \(count) bytes, found \(bytes.count)")
            }
            return bytes
        }
    }
}

extension CBORKind where T == String {
    /// A text string.
    static var text: CBORKind<String> { .simple("a text string", \.textValue) }
}

extension CBORKind where T == Bool {
    /// `true` or `false`.
    static var bool: CBORKind<Bool> { .simple("a boolean", \.boolValue) }
}

extension CBORKind where T == Int {
    /// An integer of either sign that fits in `Int`.
    static var int: CBORKind<Int> {
        CBORKind { (value, path) throws(CTAP2Error) -> Int in
            guard value.majorType <= 1 else {
                throw CTAP2Error(.wrongType, "\(path): expected an integer, found \(value.kindName)")
            }
            guard let n = value.intValue else {
                throw CTAP2Error(.invalidValue, "\(path): integer \(value) out of range")
            }
            return n
        }
    }

    /// A non-negative integer that fits in `Int`.
    static var unsigned: CBORKind<Int> {
        CBORKind { (value, path) throws(CTAP2Error) -> Int in
            guard case .unsigned(let n) = value else {
                throw CTAP2Error(.wrongType, "\(path): expected an unsigned integer, found \(value.kindName)")
            }
            guard n <= UInt64(Int.max) else {
                throw CTAP2Error(.invalidValue, "\(path): integer \(n) out of range")
            }
            return Int(n)
        }
    }
}

extension CBORKind where T == [CBORValue] {
    /// An array of anything.
    static var array: CBORKind<[CBORValue]> { .simple("an array", \.arrayValue) }
}

extension CBORKind where T == [String: CBORValue] {
    /// A map whose keys are all text strings (extension inputs and outputs, attestation statements).
    static var textKeyedMap: CBORKind<[String: CBORValue]> {
        CBORKind { (value, path) throws(CTAP2Error) -> [String: CBORValue] in
            guard case .map(let entries) = value else {
                throw CTAP2Error(.wrongType, "\(path): expected a map, found \(value.kindName)")
            }
            var result: [String: CBORValue] = [:]
            for (key, element) in entries {
                guard case .text(let name) = key else {
                    throw CTAP2Error(.wrongType, "\(path): expected text keys, found \(key.kindName)")
                }
                // Two keys CBOR tells apart (by bytes) that a Swift dictionary does not (one name in
                // NFC and NFD): refused, rather than one kept at random.
                guard result.updateValue(element, forKey: name) == nil else {
                    throw CTAP2Error(
                        .invalidValue,
                        "\(path): two keys are the name \(CBORValue.text(name)) in different Unicode normalization forms")
                }
            }
            return result
        }
    }
}

extension CBORKind {
    /// An array whose elements all convert with `element`.
    static func array<Element>(of element: CBORKind<Element>) -> CBORKind<[Element]> where T == [Element] {
        CBORKind { (value, path) throws(CTAP2Error) -> [Element] in
            let elements = try CBORKind<[CBORValue]>.array.convert(value, path)
            var result: [Element] = []
            result.reserveCapacity(elements.count)
            for (index, item) in elements.enumerated() {
                result.append(try element.convert(item, "\(path)[\(index)]"))
            }
            return result
        }
    }
}

extension CBORKind where T: CTAP2CBORCodable {
    /// A nested structure decoded with its own `init(cbor:)`.
    static var structure: CBORKind<T> {
        CBORKind { (value, path) throws(CTAP2Error) -> T in
            do throws(CTAP2Error) {
                return try T(cbor: value)
            } catch {
                throw error.inContext(path)
            }
        }
    }
}

// MARK: - Encoding helpers

extension CBORValue {
    /// A map with text keys.
    static func textMap(_ entries: [String: CBORValue]) -> CBORValue {
        .map(Dictionary(uniqueKeysWithValues: entries.map { (CBORValue.text($0.key), $0.value) }))
    }

    /// An array of text strings.
    static func textArray(_ strings: [String]) -> CBORValue {
        .array(strings.map { .text($0) })
    }

    /// A short name of the value's type for error reasons.
    var kindName: String {
        switch self {
        case .unsigned, .negative: return "an integer"
        case .bytes: return "a byte string"
        case .text: return "a text string"
        case .array: return "an array"
        case .map: return "a map"
        case .bool: return "a boolean"
        case .null: return "null"
        case .undefined: return "undefined"
        }
    }
}
