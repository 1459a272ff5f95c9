import HybridCore
import NIOCore
import NIOWebSocket

/// The last handler of a ``WebSocketTunnel`` connection: puts binary messages in the inbox,
/// answers pings and close frames, masks everything it sends, and ends the inbox with a typed error
/// when the connection ends. Confined to the connection's event loop.
final class ClientFrameHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private enum State {
        /// Sending and receiving.
        case open
        /// We sent a close frame; waiting for the answer or EOF.
        case closing
        /// The closing handshake is done or the connection is gone.
        case closed
    }

    private let inbox: MessageInbox<[UInt8]>
    private let eventLoop: EventLoop
    private let closeTimeout: Duration
    private let maxMessageSize: Int
    private var context: ChannelHandlerContext?
    private var state = State.open
    private var closeTimer: Scheduled<Void>?
    private var pongs = PongBudget()
    /// The payload of the latest ping that came while the relay was not reading.
    private var unansweredPing: ByteBuffer?

    /// Messages received and not yet read that end the tunnel when one more arrives.
    static let maxUnreadMessages = 32

    init(inbox: MessageInbox<[UInt8]>, eventLoop: EventLoop, maxMessageSize: Int, closeTimeout: Duration) {
        self.inbox = inbox
        self.eventLoop = eventLoop
        self.maxMessageSize = maxMessageSize
        self.closeTimeout = closeTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        closeTimer?.cancel()
    }

    // MARK: - Outbound (called on the event loop by WebSocketTunnel)

    /// Writes one masked frame; fails with the tunnel's terminal error once closing or closed.
    func write(opcode: WebSocketOpcode, data: [UInt8], fin: Bool, masked: Bool) -> EventLoopFuture<Void> {
        guard case .open = state, let context else {
            let error = inbox.terminalError ?? RuntimeError.closed(.abnormalClosure, "connection lost")
            return eventLoop.makeFailedFuture(error)
        }
        let buffer = context.channel.allocator.buffer(bytes: data)
        let frame = WebSocketFrame(fin: fin, opcode: opcode, maskKey: masked ? .fresh() : nil, data: buffer)
        return context.writeAndFlush(wrapOutboundOut(frame))
    }

    /// Writes one masked binary frame per message and flushes once (one `writev` for all of them);
    /// the future completes when the last one is written.
    func write(messages: [[UInt8]]) -> EventLoopFuture<Void> {
        guard case .open = state, let context else {
            let error = inbox.terminalError ?? RuntimeError.closed(.abnormalClosure, "connection lost")
            return eventLoop.makeFailedFuture(error)
        }
        guard let last = messages.indices.last else { return eventLoop.makeSucceededVoidFuture() }
        let promise = eventLoop.makePromise(of: Void.self)
        for index in messages.indices {
            let buffer = context.channel.allocator.buffer(bytes: messages[index])
            let frame = WebSocketFrame(fin: true, opcode: .binary, maskKey: .fresh(), data: buffer)
            context.write(wrapOutboundOut(frame), promise: index == last ? promise : nil)
        }
        context.flush()
        return promise.futureResult
    }

    /// Starts the closing handshake with `code`; the connection is dropped when the relay answers or
    /// after the close timeout.
    func initiateClose(code: WebSocketCloseCode, reason: String) {
        guard case .open = state, let context else { return }
        inbox.finish(.closed(code, "closed locally"))
        sendClose(context: context, code: code, reason: reason)
    }

    private func sendClose(context: ChannelHandlerContext, code: WebSocketCloseCode?, reason: String) {
        state = .closing
        let body = CloseFramePayload.encode(code: code, reason: reason, allocator: context.channel.allocator)
        let frame = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .fresh(), data: body)
        context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
        let channel = context.channel
        closeTimer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(closeTimeout)) {
            channel.close(promise: nil)
        }
    }

    /// Ends the tunnel because of our peer's fault: fail the inbox with `error`, close with its code.
    /// Ends the inbox with `code` and `reason`, and closes with `closeCode` (the error carries it,
    /// so the caller learns the code its side sent).
    private func fail(context: ChannelHandlerContext, _ code: RuntimeError.Code, _ reason: String, closeCode: WebSocketCloseCode) {
        inbox.finish(RuntimeError(code, reason, closeCode: closeCode))
        guard case .open = state else { return }
        sendClose(context: context, code: closeCode, reason: reason)
    }

    // MARK: - Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        inbox.heard()
        switch state {
        case .closed:
            return
        case .closing:
            if frame.opcode == .connectionClose {
                state = .closed
                context.close(promise: nil)
            }
            return
        case .open:
            break
        }
        // Every frame was checked as the relay sent it (``ServerFrameCheck``, before the aggregator).
        switch frame.opcode {
        case .binary:
            // The caBLE peers exchange a handful of messages at a time; a relay that sends more than
            // the phone or desktop has read is flooding it, and the inbox must not grow without end.
            guard inbox.pendingCount < Self.maxUnreadMessages else {
                return fail(
                    context: context, .protocolViolation,
                    "the relay sent more than \(Self.maxUnreadMessages) messages that were not read yet", closeCode: .policyViolation)
            }
            inbox.push(Array(frame.unmaskedData.readableBytesView))
        case .text:
            fail(context: context, .protocolViolation, "the relay sent a text frame; tunnel messages are binary", closeCode: .unsupportedData)
        case .ping:
            // As the relay does (Docs/RELAY.md, "Back-pressure and caps"): pongs within a budget, and
            // none queued while the relay is not reading, so a ping flood cannot grow memory
            // (RFC 6455 §5.5.3 lets an endpoint answer only the latest of several pings).
            // The latest ping that came while the relay was not reading is kept (125 bytes at most,
            // copied out of the read buffer) and answered once it reads again, so a keepalive that
            // came while a big message was being written still gets its pong. One over the budget
            // is not answered; the next within it is.
            guard context.channel.isWritable else {
                unansweredPing = context.channel.allocator.buffer(buffer: frame.unmaskedData)
                return
            }
            guard pongs.take(now: context.eventLoop.now) else { return }
            unansweredPing = nil
            pong(frame.unmaskedData, context: context)
        case .pong:
            break
        case .connectionClose:
            let check = CloseFrameCheck.check(frame.unmaskedData)
            if check.broken {
                // Said as what the relay did wrong, not as a close it never validly sent.
                inbox.finish(
                    RuntimeError(.protocolViolation, "the relay sent a malformed close frame: \(check.reason)", closeCode: check.code))
            } else {
                inbox.finish(.closed(check.code ?? .noStatusReceived, check.reason))
            }
            state = .closed
            // The code is echoed as received, unless no endpoint may send it (1005, 1006, 1015, a
            // reserved one) or the body is malformed: that is answered 1002 (RFC 6455 §7.4.1), or
            // 1007 for a reason that is not UTF-8.
            let answerCode = check.code
            let echo = CloseFramePayload.encode(code: answerCode, reason: "", allocator: context.channel.allocator)
            let answer = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .fresh(), data: echo)
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(answer)).whenComplete { _ in channel.close(promise: nil) }
        default:
            fail(
                context: context, .protocolViolation,
                "the relay sent a frame with opcode \(UInt8(webSocketOpcode: frame.opcode)), which RFC 6455 does not define",
                closeCode: .protocolError)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if case .open = state, context.channel.isWritable, let payload = unansweredPing, pongs.take(now: context.eventLoop.now) {
            unansweredPing = nil
            pong(payload, context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    private func pong(_ payload: ByteBuffer, context: ChannelHandlerContext) {
        let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .fresh(), data: payload)
        context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        state = .closed
        closeTimer?.cancel()
        inbox.finish(.closed(.abnormalClosure, "connection closed without a close frame"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        switch error {
        case NIOWebSocketFrameAggregator.Error.tooManyFragments:
            fail(
                context: context, .messageTooLarge,
                "the relay sent a message in more than \(MessageAssembler.maxFragments) fragments", closeCode: .messageTooBig)
        case let violation as ServerFrameCheck.Violation:
            fail(context: context, .protocolViolation, violation.reason, closeCode: .protocolError)
        case NIOWebSocketError.invalidFrameLength, NIOWebSocketFrameAggregator.Error.accumulatedFrameSizeIsTooLarge:
            fail(context: context, .messageTooLarge, "the relay sent a message larger than \(maxMessageSize) bytes", closeCode: .messageTooBig)
        case is NIOWebSocketError, is NIOWebSocketFrameAggregator.Error:
            fail(
                context: context, .protocolViolation, "WebSocket protocol error from the relay: \(Self.describe(error))",
                closeCode: .protocolError)
        default:
            inbox.finish(.closed(.abnormalClosure, "connection error: \(RuntimeError.systemReason(error))"))
            state = .closed
            context.close(promise: nil)
        }
    }
}

extension WebSocketMaskingKey {
    /// A masking key from ``RandomSource/system`` (RFC 6455 §5.3: unpredictable, fresh for each
    /// frame), which draws from a pool of kernel randomness instead of a system call per key as
    /// NIO's `random()` does.
    static func fresh() -> WebSocketMaskingKey {
        guard let key = WebSocketMaskingKey(RandomSource.system.bytes(4)) else {
            preconditionFailure("4 random bytes always make a masking key")
        }
        return key
    }
}

/// Checks every frame from the relay as it was sent, fragments included, before SwiftNIO's
/// aggregator joins them: a frame no server may send (masked, a reserved bit set) is dropped and
/// reported to ``ClientFrameHandler`` as a ``Violation``.
final class ServerFrameCheck: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame

    struct Violation: Error {
        var reason: String
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        if let violation = Self.framingViolation(frame) {
            context.fireErrorCaught(Violation(reason: violation))
            return
        }
        context.fireChannelRead(data)
    }
}

extension ServerFrameCheck {
    /// What is wrong with a frame no server may send (RFC 6455 §5.1, §5.2), or `nil`.
    static func framingViolation(_ frame: WebSocketFrame) -> String? {
        if frame.maskKey != nil {
            return "the relay sent a masked frame; a server never masks its frames (RFC 6455 §5.1)"
        }
        if frame.rsv1 || frame.rsv2 || frame.rsv3 {
            return "the relay set a reserved bit of a frame, but no extension was negotiated (RFC 6455 §5.2)"
        }
        return nil
    }
}

extension ClientFrameHandler {
    /// SwiftNIO's WebSocket decoding errors in words.
    static func describe(_ error: any Error) -> String {
        switch error {
        case NIOWebSocketError.fragmentedControlFrame:
            return "a fragmented control frame"
        case NIOWebSocketError.multiByteControlFrameLength:
            return "a control frame longer than 125 bytes"
        case NIOWebSocketFrameAggregator.Error.didReceiveFragmentBeforeReceivingTextOrBinaryFrame:
            return "a continuation frame with no message to continue"
        case NIOWebSocketFrameAggregator.Error.receivedNewFrameWithoutFinishingPrevious:
            return "a new message before the previous one's last fragment"
        case NIOWebSocketFrameAggregator.Error.nonFinalFragmentSizeIsTooSmall:
            return "a message fragment shorter than the smallest allowed"
        default:
            return "\(error)"
        }
    }
}
