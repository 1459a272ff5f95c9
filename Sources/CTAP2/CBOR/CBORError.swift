/// Why CBOR input was rejected. Two errors are equal when their ``code`` is; the offset is diagnostic.
public struct CBORError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The rule the input broke.
    public enum Code: String, Hashable, Sendable {
        /// The input ended inside an item, or a length points past the end of the input.
        case truncated
        /// Bytes follow the single top-level item.
        case trailingBytes
        /// An indefinite-length string, array or map (forbidden by CTAP2 canonical encoding).
        case indefiniteLength
        /// Additional information 28–30, or a break byte outside an indefinite item.
        case malformed
        /// A map repeats a key.
        case duplicateMapKey
        /// Arrays and maps are nested deeper than ``CBORDecodingOptions/maxDepth``.
        case nestingTooDeep
        /// A text string is not valid UTF-8.
        case invalidUTF8
        /// A tag, floating-point number or unassigned simple value (outside the CTAP2 profile).
        case unsupportedType
        /// An integer or length not in its shortest form, or map keys out of canonical order.
        case nonCanonical
    }

    /// The rule the input broke.
    public let code: Code
    /// Byte offset at which the problem was found.
    public let offset: Int

    /// Creates an error.
    public init(_ code: Code, offset: Int) {
        self.code = code
        self.offset = offset
    }

    public static func == (lhs: CBORError, rhs: CBORError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    // Codes usable as values in `#expect(throws:)`.
    public static let truncated = CBORError(.truncated, offset: 0)
    public static let trailingBytes = CBORError(.trailingBytes, offset: 0)
    public static let indefiniteLength = CBORError(.indefiniteLength, offset: 0)
    public static let malformed = CBORError(.malformed, offset: 0)
    public static let duplicateMapKey = CBORError(.duplicateMapKey, offset: 0)
    public static let nestingTooDeep = CBORError(.nestingTooDeep, offset: 0)
    public static let invalidUTF8 = CBORError(.invalidUTF8, offset: 0)
    public static let unsupportedType = CBORError(.unsupportedType, offset: 0)
    public static let nonCanonical = CBORError(.nonCanonical, offset: 0)

    public var description: String {
        let what: String
        switch code {
        case .truncated: what = "input ends inside an item"
        case .trailingBytes: what = "trailing bytes after the item"
        case .indefiniteLength: what = "indefinite-length item"
        case .malformed: what = "malformed initial byte"
        case .duplicateMapKey: what = "duplicate map key"
        case .nestingTooDeep: what = "nesting too deep"
        case .invalidUTF8: what = "text string is not valid UTF-8"
        case .unsupportedType: what = "tag, float or simple value outside the CTAP2 profile"
        case .nonCanonical: what = "not CTAP2 canonical (non-shortest integer or unsorted map keys)"
        }
        return "CBOR: \(what) at offset \(offset)"
    }
}
