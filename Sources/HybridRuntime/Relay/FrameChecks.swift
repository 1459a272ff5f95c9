import NIOCore

extension WebSocketCloseCode {
    /// 1007: a message's data is inconsistent with its type (a close reason that is not UTF-8).
    public static let invalidFramePayloadData = WebSocketCloseCode(rawValue: 1007)
}

/// The relay's reading of a peer's close frame body (RFC 6455 §5.5.1, §7.1.5, §7.4).
enum CloseFrameCheck {
    /// The code and reason to pass on for `body`: an empty body is "no status" (`nil`); a 1-byte
    /// body or a code no endpoint may send becomes 1002 (protocol error); a reason that is not
    /// UTF-8 becomes 1007 (invalid frame payload data). The relay answers the peer with that code
    /// and closes the other side of the tunnel with it. `broken`: the relay replaced what the peer
    /// sent (the last three cases), rather than passing on the peer's own code and reason.
    static func check(_ body: ByteBuffer) -> (code: WebSocketCloseCode?, reason: String, broken: Bool) {
        switch body.readableBytes {
        case 0:
            return (nil, "", false)
        case 1:
            return (.protocolError, "close frame body of 1 byte (a code needs 2)", true)
        default:
            break
        }
        var body = body
        guard let raw = body.readInteger(as: UInt16.self) else { return (nil, "", false) }
        let code = WebSocketCloseCode(rawValue: raw)
        guard code.isSendable else { return (.protocolError, "invalid close code \(raw)", true) }
        let reasonBytes = body.readBytes(length: body.readableBytes) ?? []
        guard let reason = String(validating: reasonBytes, as: UTF8.self) else {
            return (.invalidFramePayloadData, "close reason is not UTF-8", true)
        }
        return (code, reason, false)
    }
}

/// A token bucket for pongs: a peer gets ``burst`` pongs at once and ``perSecond`` a second after
/// that; pings over the budget are not answered (and cost the relay no memory).
struct PongBudget {
    /// Pongs available at once.
    static let burst = 16.0
    /// Pongs per second after the burst.
    static let perSecond = 4.0

    private var bucket = TokenBucket(burst: PongBudget.burst, perSecond: PongBudget.perSecond)

    /// Whether a pong may be sent at `now`; takes it from the budget if so.
    mutating func take(now: NIODeadline) -> Bool {
        bucket.take(now: now)
    }
}
