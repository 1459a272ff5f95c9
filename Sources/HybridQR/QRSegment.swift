/// One segment of QR data with its encoding mode (ISO/IEC 18004 §7.4).
///
/// A QR symbol may mix modes; each segment costs a 4-bit mode indicator plus a length field,
/// then its data at the mode's density: numeric 10 bits per 3 digits, alphanumeric 11 bits per
/// 2 characters, byte 8 bits per byte. `FIDO:/` URLs are almost all digits precisely so that
/// numeric mode applies.
public struct QRSegment: Sendable, Hashable {
    /// The QR encoding mode of a segment.
    public enum Mode: Sendable, Hashable, CustomStringConvertible {
        /// Digits `0`–`9` only, 3⅓ bits per digit.
        case numeric
        /// `0`–`9`, `A`–`Z`, space and `$%*+-./:`; 5½ bits per character.
        case alphanumeric
        /// Any bytes, 8 bits per byte.
        case byte

        /// `numeric`, `alphanumeric` or `byte`.
        public var description: String {
            switch self {
            case .numeric: "numeric"
            case .alphanumeric: "alphanumeric"
            case .byte: "byte"
            }
        }
    }

    /// The mode this segment is encoded in.
    public let mode: Mode
    /// The segment's characters as ASCII/UTF-8 bytes.
    public let bytes: [UInt8]

    /// The 45 characters of the alphanumeric mode's character set.
    static let alphanumericSet: Set<UInt8> = Set(Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ $%*+-./:".utf8))

    /// Creates a segment, checking that every byte is allowed in `mode`.
    ///
    /// - Throws: ``QRError/Code/invalidInput`` naming the first disallowed character.
    public init(_ mode: Mode, _ text: String) throws(QRError) {
        let bytes = Array(text.utf8)
        switch mode {
        case .numeric:
            if let bad = bytes.firstIndex(where: { !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) {
                throw QRError(.invalidInput, "numeric segment has a non-digit at offset \(bad)")
            }
        case .alphanumeric:
            if let bad = bytes.firstIndex(where: { !Self.alphanumericSet.contains($0) }) {
                throw QRError(.invalidInput, "alphanumeric segment has a disallowed character at offset \(bad)")
            }
        case .byte:
            break
        }
        self.mode = mode
        self.bytes = bytes
    }

    /// Creates a byte-mode segment holding arbitrary bytes.
    public init(bytes: [UInt8]) {
        self.mode = .byte
        self.bytes = bytes
    }
}
