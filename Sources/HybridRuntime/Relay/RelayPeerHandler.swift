import NIOCore
import NIOWebSocket

/// The last handler of an upgraded relay connection: reads one peer's WebSocket frames from the
/// connection's bytes, turns them into tunnel events and writes what the tunnel sends to this peer.
///
/// On an open tunnel this is the connection's only handler: it reads the frames itself
/// (``RelayFrameReader``: NIO's frame decoder's checks and errors, payload unmasked in one pass),
/// checks and joins them (``MessageAssembler``: masked, no reserved bit, fragments joined into
/// whole messages) and writes the frames it sends as single buffers, header and payload together
/// (``RelayFrameWriter``; a relayed message's header goes into room the reader left in front of
/// its payload, so the payload is copied once, when it is unmasked). No NIO WebSocket codec, no
/// `ByteToMessageHandler` and no `WebSocketFrame` per message. When the relay injects faults the
/// pipeline is the longer one (NIO's frame decoder, ``MaskedFrameValidator``,
/// `NIOWebSocketFrameAggregator`, ``FaultInjectionHandler``, ``RelayFrameFeed``) and this handler
/// gets whole messages through ``received(_:)`` instead of bytes.
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
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

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
    /// The channel's allocator, kept so a relayed message does not reach it through the pipeline.
    private var allocator = ByteBufferAllocator()
    private var state = State.open
    private var pongs = PongBudget()
    /// Checks and joins frames; `nil` when the handlers in front of this one do it.
    private var assembler: MessageAssembler?
    /// Reads frames from the connection's bytes.
    private var reader = RelayFrameReader()
    /// Bytes NIO delivers while a read is being handled wait for it (``ReadsInOrder``).
    private var reads = ReadsInOrder()
    /// A write to this peer waits for the other peer's read burst to end.
    private var unflushed = false
    /// Reading is held back because the other peer cannot take more.
    private var pausedForPeer = false
    /// A `read()` arrived while paused; it is issued on resume.
    private var pendingRead = false

    /// `assemblesMessages`: this handler reads, checks and joins frames itself; `false`: it gets
    /// whole messages from a ``RelayFrameFeed`` (see the type's documentation).
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
        allocator = context.channel.allocator
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    // MARK: - Outbound (called by the tunnel)

    /// Sends one relayed message to this peer, as it came (no copy). `flush: false`: the sender's
    /// read burst is still running; its end calls ``flushDeferred()``.
    func deliver(_ message: ByteBuffer, flush: Bool = true) {
        guard case .open = state, let context else { return }
        let frame = RelayFrameWriter.frame(opcode: .binary, payload: message, allocator: allocator)
        context.write(wrapOutboundOut(frame), promise: nil)
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

    /// Drops the connection after the close-handshake timeout unless it closed by then (the
    /// shard's queue of close deadlines: nothing to cancel when it closes in time). Called once, as
    /// the handler leaves `.open` (sending a close frame, or answering one).
    private func armCloseTimer(_ context: ChannelHandlerContext) {
        tunnel.registry.closeAfterHandshakeTimeout(context.channel)
    }

    /// Starts the closing handshake with this peer; drops the connection if the peer does not answer
    /// within the close-handshake timeout.
    func sendClose(code: WebSocketCloseCode?, reason: String) {
        guard case .open = state, let context else { return }
        state = .closing
        let body = CloseFramePayload.encode(code: code, reason: reason, allocator: context.channel.allocator)
        context.writeAndFlush(
            wrapOutboundOut(RelayFrameWriter.frame(opcode: .connectionClose, payload: body, allocator: context.channel.allocator)),
            promise: nil
        )
        armCloseTimer(context)
    }

    // MARK: - Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // A read delivered from inside this handler's own flush waits for the current one.
        guard var input = reads.begin(unwrapInboundIn(data)) else { return }
        repeat {
            do {
                try reader.read(input, maxFrameSize: configuration.maxMessageSize, allocator: allocator) { frame in
                    assembled(frame, context: context)
                }
            } catch {
                errorCaught(context: context, error: error)
            }
        } while reads.next(into: &input)
    }

    /// A frame read by this handler: checked and joined (``MessageAssembler``), then handled.
    private func assembled(_ frame: ClientFrame, context: ChannelHandlerContext) {
        guard assembler != nil else { return }
        do {
            guard let whole = try assembler!.take(frame, maxMessageSize: configuration.maxMessageSize) else { return }
            handle(whole, context: context)
        } catch MessageAssembler.Failed.earlier {
            return
        } catch {
            errorCaught(context: context, error: error)
        }
    }

    /// A whole message or control frame from the fault-injection pipeline (``RelayFrameFeed``).
    func received(_ frame: ClientFrame) {
        guard let context else { return }
        handle(frame, context: context)
    }

    private func handle(_ frame: ClientFrame, context: ChannelHandlerContext) {
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
            tunnel.received(frame.payload, from: side, inReadBurst: assembler != nil)
        case .text:
            tunnel.close(code: .unsupportedData, reason: "\(tunnel.name(side)) sent a text frame; tunnel messages are binary")
        case .ping:
            // RFC 6455 §5.5.2 asks for a pong to every ping; the relay deliberately answers only
            // within the pong budget, and never queues one while this peer is not reading
            // (Docs/RELAY.md, "Back-pressure and caps"): a ping flood must not grow memory.
            guard context.channel.isWritable, pongs.take(now: context.eventLoop.now) else { return }
            let pong = RelayFrameWriter.frame(opcode: .pong, payload: frame.payload, allocator: context.channel.allocator)
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
    private func receivedClose(context: ChannelHandlerContext, frame: ClientFrame) {
        let (code, peerReason, broken) = CloseFrameCheck.check(frame.payload)
        // A close frame the relay replaced is passed on naming its sender, as its other protocol
        // refusals are; a well-formed one is passed on as it came.
        let reason = broken ? "\(tunnel.name(side)) broke the WebSocket protocol: \(peerReason)" : peerReason
        state = .closed
        let echo = CloseFramePayload.encode(code: code, reason: "", allocator: context.channel.allocator)
        let channel = context.channel
        // The echo's write never completes if the peer stopped reading: the timer drops it anyway.
        armCloseTimer(context)
        let frame = RelayFrameWriter.frame(opcode: .connectionClose, payload: echo, allocator: context.channel.allocator)
        context.writeAndFlush(wrapOutboundOut(frame))
            .whenComplete { _ in channel.close(promise: nil) }
        tunnel.peerClosed(side, code: code, reason: reason)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if assembler != nil { tunnel.readBurstEnded(side) }
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if case .open = state {
            state = .closed
            tunnel.peerDisconnected(side)
        }
        state = .closed
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        guard case .open = state else { return }
        // The reason goes to both peers: it names the one that broke the protocol, so the other
        // does not read it as its own fault.
        switch error {
        case is UnmaskedFrameError:
            tunnel.close(code: .protocolError, reason: "\(tunnel.name(side)) broke the WebSocket protocol: client frames must be masked")
        case is ReservedBitsError:
            tunnel.close(
                code: .protocolError, reason: "\(tunnel.name(side)) broke the WebSocket protocol: reserved bits set (no extension was negotiated)")
        case NIOWebSocketFrameAggregator.Error.tooManyFragments:
            tunnel.close(code: .messageTooBig, reason: "message in more than \(MessageAssembler.maxFragments) fragments")
        case NIOWebSocketError.invalidFrameLength,
            NIOWebSocketFrameAggregator.Error.accumulatedFrameSizeIsTooLarge:
            tunnel.close(code: .messageTooBig, reason: "message larger than \(configuration.maxMessageSize) bytes")
        case is NIOWebSocketError, is NIOWebSocketFrameAggregator.Error:
            tunnel.close(
                code: .protocolError, reason: "\(tunnel.name(side)) broke the WebSocket protocol: \(ClientFrameHandler.describe(error))")
        default:
            // I/O errors: the connection is unusable; channelInactive tells the tunnel.
            tunnel.logger.debug("connection error from the \(side): \(error)")
            context.close(promise: nil)
        }
    }
}

/// The end of the fault-injection pipeline (NIO's frame decoder, ``MaskedFrameValidator``,
/// `NIOWebSocketFrameAggregator`, ``FaultInjectionHandler``): hands each whole message or control
/// frame to the ``RelayPeerHandler`` behind it, which writes its frames itself.
final class RelayFrameFeed: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame

    private let peer: RelayPeerHandler

    init(peer: RelayPeerHandler) {
        self.peer = peer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        peer.received(ClientFrame(unwrapInboundIn(data)))
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
