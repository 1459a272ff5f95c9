
/// Why CBOR input was rejected. Two errors are equal when their ``code`` is; the offset is diagnostic.
public struct CBORError: CodedError {
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

    /// An error of `code` at offset 0, the value tests match thrown errors against.
    public init(_ code: Code) { self.init(code, offset: 0) }

    /// Where the problem was found.
    public var reason: String { "at byte offset \(offset)" }

    /// Creates an error.
    public init(_ code: Code, offset: Int) {
        self.code = code
        self.offset = offset
    }

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
