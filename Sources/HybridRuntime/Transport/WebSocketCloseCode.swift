import NIOCore
import NIOWebSocket

/// A WebSocket close status code (RFC 6455 §7.4), as sent in a close frame.
///
/// A plain value type so that callers of the runtime need not import NIO.
public struct WebSocketCloseCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The 16-bit code on the wire.
    public var rawValue: UInt16

    /// Creates a close code from its wire value.
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// 1000: the purpose of the connection was fulfilled.
    public static let normalClosure = WebSocketCloseCode(rawValue: 1000)
    /// 1001: an endpoint is going away (relay shutting down, tunnel lifetime or idle time over, peer vanished).
    public static let goingAway = WebSocketCloseCode(rawValue: 1001)
    /// 1002: WebSocket protocol error (unmasked client frame, bad fragments, bad close code).
    public static let protocolError = WebSocketCloseCode(rawValue: 1002)
    /// 1003: a data type that is not accepted (the tunnel only carries binary messages).
    public static let unsupportedData = WebSocketCloseCode(rawValue: 1003)
    /// 1005: the close frame carried no status code (never sent on the wire).
    public static let noStatusReceived = WebSocketCloseCode(rawValue: 1005)
    /// 1006: the connection dropped without a close frame (never sent on the wire).
    public static let abnormalClosure = WebSocketCloseCode(rawValue: 1006)
    /// 1008: a policy was violated (too many messages from one peer).
    public static let policyViolation = WebSocketCloseCode(rawValue: 1008)
    /// 1009: a message was larger than the limit.
    public static let messageTooBig = WebSocketCloseCode(rawValue: 1009)
    /// 1011: the endpoint hit an unexpected condition.
    public static let internalError = WebSocketCloseCode(rawValue: 1011)
    /// 1013: try again later.
    public static let tryAgainLater = WebSocketCloseCode(rawValue: 1013)
    /// 4410 (HybridSim's private range): the linked phone refused a contact because the contact ID
    /// was revoked (`phone --unlink` while it listened). The desktop treats it like HTTP 410 on
    /// `/cable/contact`: forget the link.
    public static let contactRevoked = WebSocketCloseCode(rawValue: 4410)

    /// Whether an endpoint may put this code in a close frame (RFC 6455 §7.4.1/§7.4.2).
    public var isSendable: Bool {
        switch rawValue {
        case 1000...1003, 1007...1014, 3000...4999: return true
        default: return false
        }
    }

    /// A short name of the code, e.g. "message too big".
    public var name: String {
        switch rawValue {
        case 1000: return "normal closure"
        case 1001: return "going away"
        case 1002: return "protocol error"
        case 1003: return "unsupported data"
        case 1005: return "no status"
        case 1006: return "connection lost"
        case 1007: return "invalid payload"
        case 1008: return "policy violation"
        case 1009: return "message too big"
        case 1010: return "mandatory extension"
        case 1011: return "internal error"
        case 1012: return "service restart"
        case 1013: return "try again later"
        case 4410: return "contact revoked"
        case 3000...3999: return "registered"
        case 4000...4999: return "private"
        default: return "unknown"
        }
    }

    /// "1009 (message too big)".
    public var description: String { "\(rawValue) (\(name))" }
}

// MARK: - Close frame payloads

/// Encoding and decoding of close frame bodies: a big-endian code then a UTF-8 reason.
enum CloseFramePayload {
    /// The longest reason that fits a control frame (125 bytes minus the 2-byte code).
    static let maxReasonBytes = 123

    /// Builds a close frame body; `nil` code means an empty body (no status).
    static func encode(code: WebSocketCloseCode?, reason: String, allocator: ByteBufferAllocator) -> ByteBuffer {
        guard let code else { return allocator.buffer(capacity: 0) }
        var reasonBytes = Array(reason.utf8)
        if reasonBytes.count > maxReasonBytes {
            reasonBytes = Array(reasonBytes.prefix(maxReasonBytes))
            // Do not cut a UTF-8 sequence in half.
            while let last = reasonBytes.last, last & 0xC0 == 0x80 { reasonBytes.removeLast() }
            if let last = reasonBytes.last, last >= 0xC0 { reasonBytes.removeLast() }
        }
        var buffer = allocator.buffer(capacity: 2 + reasonBytes.count)
        buffer.writeInteger(code.rawValue)
        buffer.writeBytes(reasonBytes)
        return buffer
    }

    /// Reads a close frame body: `nil` code when the body is empty (1005 semantics).
    static func decode(_ data: ByteBuffer) -> (code: WebSocketCloseCode?, reason: String) {
        var data = data
        guard let raw = data.readInteger(as: UInt16.self) else { return (nil, "") }
        let reason = data.readString(length: data.readableBytes) ?? ""
        return (WebSocketCloseCode(rawValue: raw), reason)
    }
}
