/// CTAP2 canonical CBOR (CTAP 2.x §8 "Message Encoding").
///
/// - ``encode(_:)`` writes definite lengths, shortest integer forms, and map keys in CTAP2 order:
///   lower major type first, then shorter encoding, then byte-wise lexical order.
/// - ``decode(_:options:)`` is strict: it rejects truncation, trailing bytes, indefinite lengths,
///   duplicate keys, nesting deeper than ``CBORDecodingOptions/maxDepth``, lengths beyond the input,
///   tags, floats, invalid UTF-8 and (by default) non-canonical input. It never traps.
public enum CBOR {
    /// Encodes a value in CTAP2 canonical form.
    public static func encode(_ value: CBORValue) -> [UInt8] {
        var out: [UInt8] = []
        append(value, to: &out)
        return out
    }

    /// Decodes exactly one item that spans the whole input.
    public static func decode(
        _ bytes: some Collection<UInt8>,
        options: CBORDecodingOptions = .init()
    ) throws(CBORError) -> CBORValue {
        var reader = CBORReader(bytes: Array(bytes), options: options)
        let value = try reader.readItem(depth: 0)
        guard reader.isAtEnd else { throw CBORError(.trailingBytes, offset: reader.offset) }
        return value
    }

    /// Decodes the first item of the input and returns it with the number of bytes it used.
    /// Used where padding follows the CBOR (revision-0 post-handshake message).
    public static func decodePrefix(
        _ bytes: some Collection<UInt8>,
        options: CBORDecodingOptions = .init()
    ) throws(CBORError) -> (value: CBORValue, length: Int) {
        var reader = CBORReader(bytes: Array(bytes), options: options)
        let value = try reader.readItem(depth: 0)
        return (value, reader.offset)
    }

    /// Whether `byte` begins a definite-length map (major type 5, 0xA0…0xBB): what a CTAP2
    /// message's CBOR starts with, used to tell a missing type or command byte from other damage.
    public static func isDefiniteMapHeader(_ byte: UInt8) -> Bool { (0xA0...0xBB).contains(byte) }

    /// Map entries in CTAP2 canonical key order.
    public static func canonicallySorted(
        _ map: [CBORValue: CBORValue]
    ) -> [(key: CBORValue, value: CBORValue)] {
        map.map { (key: $0.key, value: $0.value, encodedKey: encode($0.key)) }
            .sorted { keyPrecedes($0.encodedKey, $1.encodedKey) }
            .map { (key: $0.key, value: $0.value) }
    }

    /// CTAP2 §8 key order on encoded keys: major type, then length, then bytes.
    static func keyPrecedes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        let majorA = a.first.map { $0 >> 5 } ?? 0
        let majorB = b.first.map { $0 >> 5 } ?? 0
        if majorA != majorB { return majorA < majorB }
        if a.count != b.count { return a.count < b.count }
        return a.lexicographicallyPrecedes(b)
    }

    // MARK: - Encoding

    private static func append(_ value: CBORValue, to out: inout [UInt8]) {
        switch value {
        case .unsigned(let n):
            appendHead(major: 0, argument: n, to: &out)
        case .negative(let n):
            appendHead(major: 1, argument: n, to: &out)
        case .bytes(let bytes):
            appendHead(major: 2, argument: UInt64(bytes.count), to: &out)
            out.append(contentsOf: bytes)
        case .text(let string):
            let utf8 = Array(string.utf8)
            appendHead(major: 3, argument: UInt64(utf8.count), to: &out)
            out.append(contentsOf: utf8)
        case .array(let elements):
            appendHead(major: 4, argument: UInt64(elements.count), to: &out)
            for element in elements { append(element, to: &out) }
        case .map(let entries):
            appendHead(major: 5, argument: UInt64(entries.count), to: &out)
            let encoded = entries.map { (key: encode($0.key), value: $0.value) }
                .sorted { keyPrecedes($0.key, $1.key) }
            for entry in encoded {
                out.append(contentsOf: entry.key)
                append(entry.value, to: &out)
            }
        case .bool(let b):
            out.append(b ? 0xF5 : 0xF4)
        case .null:
            out.append(0xF6)
        case .undefined:
            out.append(0xF7)
        }
    }

    private static func appendHead(major: UInt8, argument: UInt64, to out: inout [UInt8]) {
        let type = major << 5
        switch argument {
        case 0..<24:
            out.append(type | UInt8(argument))
        case 24...0xFF:
            out.append(type | 24)
            out.append(UInt8(argument))
        case 0x100...0xFFFF:
            out.append(type | 25)
            appendBigEndian(argument, byteCount: 2, to: &out)
        case 0x1_0000...0xFFFF_FFFF:
            out.append(type | 26)
            appendBigEndian(argument, byteCount: 4, to: &out)
        default:
            out.append(type | 27)
            appendBigEndian(argument, byteCount: 8, to: &out)
        }
    }

    private static func appendBigEndian(_ value: UInt64, byteCount: Int, to out: inout [UInt8]) {
        for shift in stride(from: (byteCount - 1) * 8, through: 0, by: -8) {
            out.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
        }
    }
}

/// Knobs for ``CBOR/decode(_:options:)``.
public struct CBORDecodingOptions: Sendable, Hashable {
    /// Maximum nesting of arrays and maps. CTAP2 messages nest at most 4 levels
    /// (e.g. getAssertion extension outputs); 16 leaves ample room while bounding recursion.
    public var maxDepth: Int
    /// Reject integers and lengths not in shortest form and map keys out of CTAP2 order,
    /// as Chromium's `cbor::Reader` does.
    public var requireCanonical: Bool

    /// The default: depth 16, canonical form required.
    public init(maxDepth: Int = 16, requireCanonical: Bool = true) {
        self.maxDepth = maxDepth
        self.requireCanonical = requireCanonical
    }
}
