import NIOCore
import NIOWebSocket

/// The last handler of an upgraded relay connection: turns WebSocket frames from one peer into
/// tunnel events and writes what the tunnel sends to this peer.
///
/// Follows NIO's WebSocket frame decoder directly and checks and joins the frames itself
/// (``MessageAssembler``: masked, no reserved bit, fragments joined into whole messages), so an
/// open tunnel peer has one handler of ours instead of three. When the relay injects faults, the
/// pipeline is the longer one (``MaskedFrameValidator``, `NIOWebSocketFrameAggregator`,
/// ``FaultInjectionHandler``) and this handler gets whole messages (`assemblesMessages: false`).
/// Runs on the relay's event loop, like ``RelayTunnel``.
///
/// Flushing: a message this peer sends is written to the other peer at once and flushed when this
/// peer's read burst ends (`channelReadComplete`), so several messages in one read cost one flush.
/// Behind a fault handler (which may emit messages from a timer, outside any read) every message
/// is flushed at once.
///
/// Back-pressure: while the *other* peer's connection is not writable (its reader is slower than
/// this peer's writer), this handler holds back `read()`, so nothing more is taken from this peer's
/// socket and the kernel's buffers push back on it. Pongs are rate-limited (``PongBudget``) and
/// never queued behind an unwritable connection. Every close path runs on a timer, so a peer that
/// stops reading cannot keep its connection (and the data queued for it) alive.
final class RelayPeerHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private enum State {
        /// Relaying.
        case open
        /// We sent a close frame and wait for the peer's close frame or EOF.
        case closing
        /// The peer closed or the connection is gone.
        case closed
    }

    private let tunnel: RelayTunnel
    private let side: TunnelSide
    private var context: ChannelHandlerContext?
    private var state = State.open
    private var closeTimer: Scheduled<Void>?
    private var pongs = PongBudget()
    /// Checks and joins frames; `nil` when the handlers in front of this one do it.
    private var assembler: MessageAssembler?
    /// A write to this peer waits for the other peer's read burst to end.
    private var unflushed = false
    /// Reading is held back because the other peer cannot take more.
    private var pausedForPeer = false
    /// A `read()` arrived while paused; it is issued on resume.
    private var pendingRead = false

    /// `assemblesMessages`: this handler checks and joins frames itself (see the type's documentation).
    init(
        tunnel: RelayTunnel, side: TunnelSide, assemblesMessages: Bool = true
    ) {
        self.tunnel = tunnel
        self.side = side
        self.assembler = assemblesMessages ? MessageAssembler() : nil
    }

    /// The relay's limits (read when needed: an open connection keeps no copy of them).
    private var configuration: RelayConfiguration { tunnel.registry.configuration }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        closeTimer?.cancel()
    }

    // MARK: - Outbound (called by the tunnel)

    /// Sends one relayed message to this peer, as it came (no copy). `flush: false`: the sender's
    /// read burst is still running; its end calls ``flushDeferred()``.
    func deliver(_ message: ByteBuffer, flush: Bool = true) {
        guard case .open = state, let context else { return }
        context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .binary, data: message)), promise: nil)
        if flush {
            unflushed = false
            context.flush()
        } else {
            unflushed = true
        }
    }

    /// Flushes what ``deliver(_:flush:)`` wrote without flushing.
    func flushDeferred() {
        guard unflushed, let context else { return }
        unflushed = false
        context.flush()
    }

    /// Whether this peer's connection can take more writes now.
    var isWritable: Bool { context?.channel.isWritable ?? false }

    /// Stops (`true`) or resumes (`false`) reading from this peer, because the other peer's
    /// connection cannot (or can again) take what this peer sends.
    func setPausedForPeer(_ paused: Bool) {
        guard paused != pausedForPeer else { return }
        pausedForPeer = paused
        if !paused, pendingRead, let context {
            pendingRead = false
            context.read()
        }
    }

    func read(context: ChannelHandlerContext) {
        if pausedForPeer {
            pendingRead = true
        } else {
            context.read()
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        tunnel.writabilityChanged(side, writable: context.channel.isWritable)
        context.fireChannelWritabilityChanged()
    }

    /// Drops the connection after the close-handshake timeout unless it closed by then.
    private func armCloseTimer(_ context: ChannelHandlerContext) {
        guard closeTimer == nil else { return }
        let channel = context.channel
        closeTimer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(configuration.closeHandshakeTimeout)) {
            channel.close(promise: nil)
        }
    }

    /// Starts the closing handshake with this peer; drops the connection if the peer does not answer
    /// within the close-handshake timeout.
    func sendClose(code: WebSocketCloseCode?, reason: String) {
        guard case .open = state, let context else { return }
        state = .closing
        let body = CloseFramePayload.encode(code: code, reason: reason, allocator: context.channel.allocator)
        context.writeAndFlush(
            wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: body)),
            promise: nil
        )
        armCloseTimer(context)
    }

    // MARK: - Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var frame = unwrapInboundIn(data)
        if assembler != nil {
            do {
                guard let whole = try assembler!.take(frame, maxMessageSize: configuration.maxMessageSize) else { return }
                frame = whole
            } catch MessageAssembler.Failed.earlier {
                return
            } catch {
                errorCaught(context: context, error: error)
                return
            }
        }
        switch state {
        case .closed:
            return
        case .closing:
            // Waiting for the peer's answer; everything else it still sends is dropped.
            if frame.opcode == .connectionClose { context.close(promise: nil) }
            return
        case .open:
            break
        }
        switch frame.opcode {
        case .binary:
            tunnel.received(frame.unmaskedData, from: side, inReadBurst: assembler != nil)
        case .text:
            tunnel.close(code: .unsupportedData, reason: "text frames are not allowed; tunnel messages are binary")
        case .ping:
            // RFC 6455 §5.5.2 asks for a pong to every ping; the relay deliberately answers only
            // within the pong budget, and never queues one while this peer is not reading
            // (Docs/RELAY.md, "Back-pressure and caps"): a ping flood must not grow memory.
            guard context.channel.isWritable, pongs.take(now: .now()) else { return }
            let pong = WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .pong:
            break
        case .connectionClose:
            receivedClose(context: context, frame: frame)
        default:
            tunnel.close(code: .protocolError, reason: "unexpected WebSocket opcode \(frame.opcode)")
        }
    }

    /// The peer started the closing handshake: answer it, close the connection and pass the code on.
    private func receivedClose(context: ChannelHandlerContext, frame: WebSocketFrame) {
        let (code, reason) = CloseFrameCheck.check(frame.unmaskedData)
        state = .closed
        let echo = CloseFramePayload.encode(code: code, reason: "", allocator: context.channel.allocator)
        let channel = context.channel
        // The echo's write never completes if the peer stopped reading: the timer drops it anyway.
        armCloseTimer(context)
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: echo)))
            .whenComplete { _ in channel.close(promise: nil) }
        tunnel.peerClosed(side, code: code, reason: reason)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if assembler != nil { tunnel.readBurstEnded(side) }
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        closeTimer?.cancel()
        if case .open = state {
            state = .closed
            tunnel.peerDisconnected(side)
        }
        state = .closed
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        guard case .open = state else { return }
        switch error {
        case is UnmaskedFrameError:
            tunnel.close(code: .protocolError, reason: "client frames must be masked")
        case is ReservedBitsError:
            tunnel.close(code: .protocolError, reason: "reserved bits set (no extension was negotiated)")
        case NIOWebSocketError.invalidFrameLength,
            NIOWebSocketFrameAggregator.Error.accumulatedFrameSizeIsTooLarge,
            NIOWebSocketFrameAggregator.Error.tooManyFragments:
            tunnel.close(code: .messageTooBig, reason: "message larger than \(configuration.maxMessageSize) bytes")
        case is NIOWebSocketError, is NIOWebSocketFrameAggregator.Error:
            tunnel.close(code: .protocolError, reason: "WebSocket protocol error: \(error)")
        default:
            // I/O errors: the connection is unusable; channelInactive tells the tunnel.
            tunnel.logger.debug("connection error from the \(side): \(error)")
            context.close(promise: nil)
        }
    }
}

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
    mutating func take(_ frame: WebSocketFrame, maxMessageSize: Int) throws -> WebSocketFrame? {
        guard !failed else { throw Failed.earlier }
        // MaskedFrameValidator's checks: after one of these nothing more is taken.
        guard frame.maskKey != nil else {
            failed = true
            throw UnmaskedFrameError()
        }
        guard !frame.rsv1, !frame.rsv2, !frame.rsv3 else {
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
    private mutating func join(_ frame: WebSocketFrame, maxMessageSize: Int) throws -> WebSocketFrame? {
        switch frame.opcode {
        case .continuation:
            guard let first = opcode else {
                throw NIOWebSocketFrameAggregator.Error.didReceiveFragmentBeforeReceivingTextOrBinaryFrame
            }
            try append(frame, maxMessageSize: maxMessageSize)
            guard frame.fin else { return nil }
            let message = WebSocketFrame(fin: true, opcode: first, data: joined ?? ByteBuffer())
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
    private mutating func append(_ frame: WebSocketFrame, maxMessageSize: Int) throws {
        guard fragments < Self.maxFragments, frame.fin || fragments + 1 < Self.maxFragments else {
            throw NIOWebSocketFrameAggregator.Error.tooManyFragments
        }
        fragments += 1
        guard (joined?.readableBytes ?? 0) + frame.length <= maxMessageSize else {
            throw NIOWebSocketFrameAggregator.Error.accumulatedFrameSizeIsTooLarge
        }
        var data = frame.unmaskedData
        if joined == nil {
            joined = data
        } else {
            joined!.writeBuffer(&data)
        }
    }
}

/// Raised by ``MaskedFrameValidator`` for a client frame without a mask (RFC 6455 §5.1).
struct UnmaskedFrameError: Error {}

/// Raised by ``MaskedFrameValidator`` for a frame with RSV1, RSV2 or RSV3 set: the relay negotiates no
/// extension, so RFC 6455 §5.2 requires failing the connection (1002).
struct ReservedBitsError: Error {}

/// Sits between the frame decoder and the aggregator (which drops mask keys and reserved bits when
/// it joins fragments) and reports any unmasked client frame as ``UnmaskedFrameError`` and any frame
/// with a reserved bit as ``ReservedBitsError``.
final class MaskedFrameValidator: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame

    private var failed = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        let frame = unwrapInboundIn(data)
        guard frame.maskKey != nil else {
            failed = true
            context.fireErrorCaught(UnmaskedFrameError())
            return
        }
        guard !frame.rsv1, !frame.rsv2, !frame.rsv3 else {
            failed = true
            context.fireErrorCaught(ReservedBitsError())
            return
        }
        context.fireChannelRead(data)
    }
}
