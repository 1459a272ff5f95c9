import NIOCore
import NIOWebSocket

/// The last handler of an upgraded relay connection: turns WebSocket frames from one peer into
/// tunnel events and writes what the tunnel sends to this peer.
///
/// Sits after `NIOWebSocketFrameAggregator`, so every binary frame it sees is a whole message.
/// Runs on the relay's event loop, like ``RelayTunnel``.
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
    private let maxMessageSize: Int
    private let closeHandshakeTimeout: Duration
    private var context: ChannelHandlerContext?
    private var state = State.open
    private var closeTimer: Scheduled<Void>?
    private var pongs = PongBudget()
    /// Reading is held back because the other peer cannot take more.
    private var pausedForPeer = false
    /// A `read()` arrived while paused; it is issued on resume.
    private var pendingRead = false

    init(tunnel: RelayTunnel, side: TunnelSide, maxMessageSize: Int, closeHandshakeTimeout: Duration) {
        self.tunnel = tunnel
        self.side = side
        self.maxMessageSize = maxMessageSize
        self.closeHandshakeTimeout = closeHandshakeTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        closeTimer?.cancel()
    }

    // MARK: - Outbound (called by the tunnel)

    /// Sends one relayed message to this peer, as it came (no copy).
    func deliver(_ message: ByteBuffer) {
        guard case .open = state, let context else { return }
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .binary, data: message)), promise: nil)
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
        closeTimer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(closeHandshakeTimeout)) {
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
        let frame = unwrapInboundIn(data)
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
            tunnel.received(frame.unmaskedData, from: side)
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
            tunnel.close(code: .messageTooBig, reason: "message larger than \(maxMessageSize) bytes")
        case is NIOWebSocketError, is NIOWebSocketFrameAggregator.Error:
            tunnel.close(code: .protocolError, reason: "WebSocket protocol error: \(error)")
        default:
            // I/O errors: the connection is unusable; channelInactive tells the tunnel.
            tunnel.logger.debug("connection error from the \(side): \(error)")
            context.close(promise: nil)
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
