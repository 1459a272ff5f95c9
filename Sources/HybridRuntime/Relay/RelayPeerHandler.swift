import NIOCore
import NIOWebSocket

/// The last handler of an upgraded relay connection: turns WebSocket frames from one peer into
/// tunnel events and writes what the tunnel sends to this peer.
///
/// Sits after `NIOWebSocketFrameAggregator`, so every binary frame it sees is a whole message.
/// Runs on the relay's event loop, like ``RelayTunnel``.
final class RelayPeerHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
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

    /// Sends one relayed message to this peer.
    func deliver(_ message: [UInt8]) {
        guard case .open = state, let context else { return }
        let buffer = context.channel.allocator.buffer(bytes: message)
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .binary, data: buffer)), promise: nil)
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
        let channel = context.channel
        closeTimer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(closeHandshakeTimeout)) {
            channel.close(promise: nil)
        }
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
            tunnel.received(Array(frame.unmaskedData.readableBytesView), from: side)
        case .text:
            tunnel.close(code: .unsupportedData, reason: "text frames are not allowed; tunnel messages are binary")
        case .ping:
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
        var (code, reason) = CloseFramePayload.decode(frame.unmaskedData)
        if let received = code, !received.isSendable {
            (code, reason) = (.protocolError, "invalid close code \(received.rawValue)")
        }
        state = .closed
        let echo = CloseFramePayload.encode(code: code, reason: "", allocator: context.channel.allocator)
        let channel = context.channel
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

/// Sits between the frame decoder and the aggregator (which drops mask keys when it joins
/// fragments) and reports any unmasked client frame as ``UnmaskedFrameError``.
final class MaskedFrameValidator: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame

    private var failed = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        guard unwrapInboundIn(data).maskKey != nil else {
            failed = true
            context.fireErrorCaught(UnmaskedFrameError())
            return
        }
        context.fireChannelRead(data)
    }
}
