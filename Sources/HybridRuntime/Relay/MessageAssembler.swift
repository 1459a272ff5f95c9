import NIOCore
import NIOWebSocket

/// Checks a peer's frames and joins fragments into whole messages, inside ``RelayPeerHandler``:
/// exactly what ``MaskedFrameValidator`` followed by `NIOWebSocketFrameAggregator(minNonFinalFragmentSize: 0,
/// maxAccumulatedFrameCount: 256, maxAccumulatedFrameSize: maxMessageSize)` do, with the same
/// errors, without their two handlers (and their contexts) on every open connection.
struct MessageAssembler {
    /// Thrown for every frame after an unmasked frame or one with a reserved bit: like
    /// ``MaskedFrameValidator``, nothing more is taken.
    enum Failed: Error { case earlier }

    /// Most fragments one message may have.
    static let maxFragments = 256

    /// The opcode of the message being joined, if any.
    private var opcode: WebSocketOpcode?
    /// The unmasked fragments so far (`nil` between messages: an idle peer holds no buffer).
    private var joined: ByteBuffer?
    private var fragments = 0
    private var failed = false

    /// A frame as it was decoded: the frame to handle (a whole message or a control frame), `nil`
    /// while fragments are being joined.
    ///
    /// - Throws: ``UnmaskedFrameError`` or ``ReservedBitsError``, then ``Failed/earlier`` for every
    ///   later frame (as ``MaskedFrameValidator``); `NIOWebSocketFrameAggregator.Error` as NIO's
    ///   aggregator, which drops the fragments so far and takes the next frame.
    mutating func take(_ frame: ClientFrame, maxMessageSize: Int) throws -> ClientFrame? {
        guard !failed else { throw Failed.earlier }
        // MaskedFrameValidator's checks: after one of these nothing more is taken.
        guard frame.masked else {
            failed = true
            throw UnmaskedFrameError()
        }
        guard !frame.reservedBits else {
            failed = true
            throw ReservedBitsError()
        }
        do {
            return try join(frame, maxMessageSize: maxMessageSize)
        } catch {
            // Like NIO's aggregator: drop what was joined so far and go on with the next frame.
            (opcode, joined, fragments) = (nil, nil, 0)
            throw error
        }
    }

    /// `NIOWebSocketFrameAggregator.channelRead`'s decisions.
    private mutating func join(_ frame: ClientFrame, maxMessageSize: Int) throws -> ClientFrame? {
        switch frame.opcode {
        case .continuation:
            guard let first = opcode else {
                throw NIOWebSocketFrameAggregator.Error.didReceiveFragmentBeforeReceivingTextOrBinaryFrame
            }
            try append(frame, maxMessageSize: maxMessageSize)
            guard frame.fin else { return nil }
            let message = ClientFrame(fin: true, opcode: first, payload: joined ?? ByteBuffer())
            (opcode, joined, fragments) = (nil, nil, 0)
            return message
        case .binary, .text:
            guard opcode == nil else { throw NIOWebSocketFrameAggregator.Error.receivedNewFrameWithoutFinishingPrevious }
            if frame.fin { return frame }
            try append(frame, maxMessageSize: maxMessageSize)
            opcode = frame.opcode
            return nil
        default:
            // Control frames are never fragmented and may come between fragments.
            return frame
        }
    }

    /// NIO's aggregator's checks, in its order, then the fragment's unmasked bytes.
    private mutating func append(_ frame: ClientFrame, maxMessageSize: Int) throws {
        guard fragments < Self.maxFragments, frame.fin || fragments + 1 < Self.maxFragments else {
            throw NIOWebSocketFrameAggregator.Error.tooManyFragments
        }
        fragments += 1
        guard (joined?.readableBytes ?? 0) + frame.payload.readableBytes <= maxMessageSize else {
            throw NIOWebSocketFrameAggregator.Error.accumulatedFrameSizeIsTooLarge
        }
        var data = frame.payload
        if joined == nil {
            joined = data
        } else {
            joined!.writeBuffer(&data)
        }
    }
}

