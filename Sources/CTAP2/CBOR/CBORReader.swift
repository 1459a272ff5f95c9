/// The strict decoder behind ``CBOR/decode(_:options:)``: a cursor over the input.
struct CBORReader {
    private let bytes: [UInt8]
    private let options: CBORDecodingOptions
    private(set) var offset = 0

    init(bytes: [UInt8], options: CBORDecodingOptions) {
        self.bytes = bytes
        self.options = options
    }

    var isAtEnd: Bool { offset == bytes.count }

    private var remaining: Int { bytes.count - offset }

    mutating func readItem(depth: Int) throws(CBORError) -> CBORValue {
        let start = offset
        let initial = try readByte()
        let major = initial >> 5
        let info = initial & 0x1F

        if major == 7 {
            return try readSimple(info: info, start: start)
        }
        if info == 31 { throw CBORError(.indefiniteLength, offset: start) }
        let argument = try readArgument(info: info, start: start)

        switch major {
        case 0:
            return .unsigned(argument)
        case 1:
            return .negative(argument)
        case 2:
            return .bytes(try readBytes(count: argument, start: start))
        case 3:
            let raw = try readBytes(count: argument, start: start)
            // `String(decoding:)` replaces ill-formed sequences with U+FFFD, so the input was valid
            // UTF-8 exactly when the result re-encodes to the same bytes. (`String(validating:as:)`
            // would need macOS 15, above the package's macOS 14 floor.)
            let string = String(decoding: raw, as: UTF8.self)
            guard string.utf8.elementsEqual(raw) else {
                throw CBORError(.invalidUTF8, offset: start)
            }
            return .text(string)
        case 4:
            guard depth < options.maxDepth else { throw CBORError(.nestingTooDeep, offset: start) }
            // Every element takes at least one byte: a count above what is left cannot be valid,
            // and checking first keeps a hostile count from driving a huge allocation.
            guard argument <= UInt64(remaining) else { throw CBORError(.truncated, offset: start) }
            var elements: [CBORValue] = []
            elements.reserveCapacity(Int(argument))
            for _ in 0..<argument {
                elements.append(try readItem(depth: depth + 1))
            }
            return .array(elements)
        case 5:
            guard depth < options.maxDepth else { throw CBORError(.nestingTooDeep, offset: start) }
            guard argument <= UInt64(remaining / 2) else { throw CBORError(.truncated, offset: start) }
            var entries: [CBORValue: CBORValue] = [:]
            entries.reserveCapacity(Int(argument))
            var previousKey: [UInt8]? = nil
            for _ in 0..<argument {
                let keyStart = offset
                let key = try readItem(depth: depth + 1)
                let encodedKey = Array(bytes[keyStart..<offset])
                if options.requireCanonical, let previous = previousKey,
                    !CBOR.keyPrecedes(previous, encodedKey), previous != encodedKey
                {
                    throw CBORError(.nonCanonical, offset: keyStart)
                }
                let value = try readItem(depth: depth + 1)
                guard entries.updateValue(value, forKey: key) == nil else {
                    throw CBORError(.duplicateMapKey, offset: keyStart)
                }
                previousKey = encodedKey
            }
            return .map(entries)
        default:  // 6: tags are not part of the CTAP2 profile.
            throw CBORError(.unsupportedType, offset: start)
        }
    }

    private mutating func readSimple(info: UInt8, start: Int) throws(CBORError) -> CBORValue {
        switch info {
        case 20: return .bool(false)
        case 21: return .bool(true)
        case 22: return .null
        case 23: return .undefined
        case 28, 29, 30: throw CBORError(.malformed, offset: start)
        case 31: throw CBORError(.malformed, offset: start)  // a break outside an indefinite item
        default: throw CBORError(.unsupportedType, offset: start)  // other simple values, floats
        }
    }

    private mutating func readArgument(info: UInt8, start: Int) throws(CBORError) -> UInt64 {
        let value: UInt64
        let minimum: UInt64
        switch info {
        case 0..<24:
            return UInt64(info)
        case 24:
            value = try readBigEndian(byteCount: 1)
            minimum = 24
        case 25:
            value = try readBigEndian(byteCount: 2)
            minimum = 0x100
        case 26:
            value = try readBigEndian(byteCount: 4)
            minimum = 0x1_0000
        case 27:
            value = try readBigEndian(byteCount: 8)
            minimum = 0x1_0000_0000
        default:  // 28–30 reserved
            throw CBORError(.malformed, offset: start)
        }
        if options.requireCanonical, value < minimum {
            throw CBORError(.nonCanonical, offset: start)
        }
        return value
    }

    private mutating func readByte() throws(CBORError) -> UInt8 {
        guard offset < bytes.count else { throw CBORError(.truncated, offset: offset) }
        defer { offset += 1 }
        return bytes[offset]
    }

    private mutating func readBigEndian(byteCount: Int) throws(CBORError) -> UInt64 {
        guard remaining >= byteCount else { throw CBORError(.truncated, offset: offset) }
        var value: UInt64 = 0
        for _ in 0..<byteCount {
            value = value << 8 | UInt64(bytes[offset])
            offset += 1
        }
        return value
    }

    private mutating func readBytes(count: UInt64, start: Int) throws(CBORError) -> [UInt8] {
        guard count <= UInt64(remaining) else { throw CBORError(.truncated, offset: start) }
        let end = offset + Int(count)
        defer { offset = end }
        return Array(bytes[offset..<end])
    }
}
