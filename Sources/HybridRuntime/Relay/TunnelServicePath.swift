/// A request path of the tunnel service (PROTOCOL.md §4.2), parsed strictly or built canonically.
///
/// Paths are built with upper-case hex (as Chromium's `base::HexEncode` does) and parsed
/// case-insensitively. Parsing rejects anything that is not exactly one of the three shapes: no
/// query string, no trailing `/`, no empty or extra segments, no `..`, exact hex lengths.
public enum TunnelServicePath: Sendable, Hashable {
    /// `/cable/new/{HEX(tunnel ID, 16 bytes)}`: the authenticator opens a tunnel.
    case new(tunnelID: [UInt8])
    /// `/cable/connect/{HEX(routing ID, 3 bytes)}/{HEX(tunnel ID, 16 bytes)}`: the client joins it.
    case connect(routingID: [UInt8], tunnelID: [UInt8])
    /// `/cable/contact/{base64url(contact ID)}`: the client contacts a linked authenticator.
    case contact(contactID: [UInt8])

    /// Size of a tunnel ID in bytes.
    public static let tunnelIDSize = 16
    /// Size of a routing ID in bytes.
    public static let routingIDSize = 3
    /// Longest accepted request target, in characters (contact IDs are the long ones).
    public static let maxPathLength = 512

    /// The canonical path: upper-case hex, unpadded base64url.
    public var path: String {
        switch self {
        case .new(let tunnelID):
            return "/cable/new/\(HexCoding.upper(tunnelID))"
        case .connect(let routingID, let tunnelID):
            return "/cable/connect/\(HexCoding.upper(routingID))/\(HexCoding.upper(tunnelID))"
        case .contact(let contactID):
            return "/cable/contact/\(Base64URL.encode(contactID))"
        }
    }

    /// Parses a request target; `nil` unless it is exactly one of the three shapes.
    public init?(parsing target: String) {
        guard target.utf8.count <= Self.maxPathLength, target.hasPrefix("/cable/") else { return nil }
        let segments = target.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        // "/cable/new/X" splits into ["", "cable", "new", "X"].
        guard segments.count >= 4, segments[0].isEmpty else { return nil }
        let method = String(decoding: segments[2], as: UTF8.self)
        switch (method, segments.count) {
        case ("new", 4):
            guard let tunnelID = HexCoding.decode(segments[3], byteCount: Self.tunnelIDSize) else { return nil }
            self = .new(tunnelID: tunnelID)
        case ("connect", 5):
            guard let routingID = HexCoding.decode(segments[3], byteCount: Self.routingIDSize),
                let tunnelID = HexCoding.decode(segments[4], byteCount: Self.tunnelIDSize)
            else { return nil }
            self = .connect(routingID: routingID, tunnelID: tunnelID)
        case ("contact", 4):
            guard let contactID = Base64URL.decode(segments[3]), !contactID.isEmpty else { return nil }
            self = .contact(contactID: contactID)
        default:
            return nil
        }
    }

    // MARK: - Messages

    /// "/cable/new", "/cable/connect", "/cable/contact", "/cable/listen" or the path itself, for error messages.
    static func endpointName(of path: String) -> String {
        for name in ["new", "connect", "contact", "listen"] where path.hasPrefix("/cable/\(name)/") {
            return "/cable/\(name)"
        }
        return path.count > 40 ? String(path.prefix(40)) + "…" : path
    }

    /// What a status means on this service, when the relay gave no explanation.
    static func explain(status: Int) -> String? {
        switch status {
        case 400: return "bad request: fido.cable subprotocol missing or not a WebSocket upgrade"
        case 404: return "unknown tunnel or routing ID"
        case 409: return "tunnel ID already open or tunnel already joined"
        case 410: return "contact ID unknown or revoked"
        case 504: return "the linked phone is not listening"
        case 503: return "relay busy or shutting down"
        default: return nil
        }
    }
}

// MARK: - Encodings

/// Hex helpers for the tunnel service (upper-case out, either case in).
enum HexCoding {
    private static let digits = Array("0123456789ABCDEF".utf8)

    /// Upper-case hex of `bytes`.
    static func upper(_ bytes: some Sequence<UInt8>) -> String {
        var out = [UInt8]()
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes exactly `byteCount` bytes of hex (either case), or `nil`.
    static func decode(_ text: some Collection<UInt8>, byteCount: Int) -> [UInt8]? {
        guard text.count == byteCount * 2 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(byteCount)
        var high: UInt8?
        for character in text {
            guard let nibble = nibble(character) else { return nil }
            if let h = high {
                out.append(h << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return out
    }

    /// Decodes hex of any even length (either case), or `nil`.
    static func decode(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        return decode(utf8, byteCount: utf8.count / 2)
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// "ABCD…": the first 4 hex digits of a tunnel ID, the only part of it ever logged.
    static func redacted(_ bytes: [UInt8]) -> String {
        String(upper(bytes.prefix(2))) + "…"
    }
}

/// Unpadded base64url (RFC 4648 §5), strict: no padding, no other characters, no dangling bits.
enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Encodes without padding.
    static func encode(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        var index = 0
        while index < bytes.count {
            let chunk = Array(bytes[index..<min(index + 3, bytes.count)])
            let value = chunk.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (16 - 8 * UInt32($1.offset)) }
            for position in 0...chunk.count {
                out.append(alphabet[Int((value >> (18 - 6 * UInt32(position))) & 0x3F)])
            }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes unpadded base64url, or `nil` when the text is not canonical.
    static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        guard text.count % 4 != 1 else { return nil }
        var out = [UInt8]()
        var accumulator: UInt32 = 0
        var bits = 0
        for character in text {
            guard let value = sextet(character) else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        // Leftover bits must be zero, otherwise two different texts would decode to the same bytes.
        guard accumulator == 0 else { return nil }
        return out
    }

    private static func sextet(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return c - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return c - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): return 62
        case UInt8(ascii: "_"): return 63
        default: return nil
        }
    }
}
