import NIOCore
import NIOHTTP1
import NIOWebSocket

/// One accepted TCP connection of the relay, from the HTTP request to the end of its tunnel.
/// Confined to the relay's event loop.
final class RelayConnection {
    /// Where the connection is in its life.
    enum State {
        /// Waiting for (the rest of) the HTTP request.
        case awaitingRequest
        /// The upgrade was accepted; the connection holds `side` of the tunnel until the WebSocket is up.
        case reserved(RelayTunnel, TunnelSide)
        /// The upgrade of a phone's push channel (`/cable/listen/{contact ID}`) was accepted.
        case listening([UInt8])
        /// The WebSocket is up and handed to a ``RelayPeerHandler`` (or a ``ListenerHandler``).
        case upgraded
        /// The request was refused; the response is being written.
        case rejected(RelayRejection)
    }

    let channel: Channel
    var state = State.awaitingRequest
    /// The request head, recorded before the upgrade handler consumes it.
    var requestHead: HTTPRequestHead?
    /// Whether the end of the first request was seen.
    var requestComplete = false
    /// Whether any byte of the request arrived: a connection that sent nothing is dropped at its
    /// upgrade timeout without an answer, one cut short mid-request is answered `408`.
    var requestStarted = false
    /// The peer's IP address, which the per-source caps count under (``AdmissionLedger``).
    let source: String?
    /// How the ``AdmissionLedger`` counts this connection.
    var admission = AdmissionState.notCounted
    /// The source whose unjoined-tunnel count holds a place for this connection's request
    /// (``RelayConfiguration/maxWaitingTunnelsPerSource``), until the tunnel opens or the request fails.
    var waitingReservation: String?
    /// Numbers the registry's connections, so an upgrade timeout never closes a later connection
    /// that got the same address (``UpgradeWaiter``); set when the registry admits it.
    var serial: UInt64 = 0

    init(channel: Channel, source: String?) {
        self.channel = channel
        self.source = source
    }

    /// Whether the connection already carries WebSocket frames.
    var isUpgraded: Bool {
        if case .upgraded = state { return true }
        return false
    }

    /// Sets up the HTTP/WebSocket pipeline of a freshly accepted connection. `counted`: the
    /// dispatcher already counted it against ``RelayConfiguration/maxConnections``.
    ///
    /// This is where an accept-time limit goes (before the HTTP pipeline exists): it runs once per
    /// connection, on the loop of the shard that got it.
    ///
    /// `admission`: what the dispatcher decided under the pending-upgrade and per-source caps
    /// (`nil`: nobody decided yet — a channel made without the dispatcher — so this decides).
    static func configure(
        _ channel: Channel, registry: RelayRegistry, counted: Bool = false, admission: DispatcherAdmission? = nil
    ) throws {
        var source = AdmissionLedger.source(of: channel)
        var countedByDispatcher = false
        if case .admitted(let dispatcherSource)? = admission {
            source = dispatcherSource
            countedByDispatcher = true
        }
        let connection = RelayConnection(channel: channel, source: source)
        if case .overCapacity? = admission {
            // Full when the dispatcher accepted it; it went to this shard unread, so it is not served
            // here even if a connection closed since (``DispatcherAdmission/overCapacity``).
            guard registry.refuseOverCapacity() else {
                channel.close(promise: nil)
                return
            }
            try channel.pipeline.syncOperations.addHandler(
                OverCapacityHandler(closeTimeout: registry.configuration.closeHandshakeTimeout))
            return
        }
        let outcome = registry.connectionOpened(connection, counted: counted)
        if outcome != .admitted, countedByDispatcher {
            registry.admissionCounts.closed(source: source, wasPending: true)
        }
        switch outcome {
        case .admitted:
            break
        case .shuttingDown:
            channel.close(promise: nil)
            return
        case .overCapacity:
            let limiter = OverCapacityHandler(closeTimeout: registry.configuration.closeHandshakeTimeout)
            try channel.pipeline.syncOperations.addHandler(limiter)
            return
        }
        let refusal: AdmissionRefusal?
        switch admission {
        case nil:
            refusal = registry.admission.admit(connection)
        case .admitted?:
            connection.admission = .pending  // counted by the dispatcher
            refusal = nil
        case .refused(let response)?:
            refusal = response
        case .overCapacity?:
            preconditionFailure("answered above")
        }
        if let refusal {
            // Pending-upgrade or per-source cap: not tracked, answered like an over-capacity connection.
            registry.connectionClosed(connection)
            registry.statistics.recordRefusal(status: refusal.status)
            // The address, so that an operator can tell whom a per-source cap refuses.
            let source = channel.remoteAddress?.ipAddress ?? "an unknown address"
            registry.logLimiter.info(registry.logger, "refused a connection from \(source): \(refusal.status) \(refusal.reason)")
            let limiter = OverCapacityHandler(response: refusal.response, closeTimeout: registry.configuration.closeHandshakeTimeout)
            try channel.pipeline.syncOperations.addHandler(limiter)
            return
        }
        channel.closeFuture.assumeIsolated().whenComplete { _ in
            registry.admission.closed(connection)
            registry.connectionClosed(connection)
            registry.admission.idleTrim.connectionClosed(on: channel.eventLoop) { registry.statistics.openConnectionCount }
        }
        registry.startUpgradeTimeout(of: connection)

        // Bounds what a client can make the relay hold: bytes sent behind the request while the
        // upgrade is decided (a contact request waits for its phone) stay in this buffer.
        let firstRequest = FirstRequestDecoder(connection: connection)
        let requestDecoder = ByteToMessageHandler(firstRequest, maximumBufferSize: 16 * 1024 + registry.configuration.maxMessageSize)
        try channel.pipeline.syncOperations.addHandlers(
            requestDecoder, RelayRequestHandler(connection: connection, registry: registry, decoder: firstRequest))
    }

    /// Carries out `decision` for this connection's upgrade request: the 101's extra headers, or
    /// `nil` to refuse.
    func shouldUpgrade(_ decision: UpgradeDecision, registry: RelayRegistry) -> HTTPHeaders? {
        switch decision {
        case .accept(let headers, let tunnel, let side):
            guard channel.isActive else {
                // A contact request whose client left while it waited for the phone: the tunnel
                // opened for it must not wait for a creator that will never come.
                tunnel.releaseReservation(side)
                registry.admission.releaseWaitingReservation(of: self)
                return nil
            }
            state = .reserved(tunnel, side)
            // No longer awaiting: the 101 goes out next, and a client that reads it may open its next
            // connection before the upgrade pipeline is installed.
            registry.admission.upgraded(self)
            if side == .creator {
                registry.admission.tunnelOpened(tunnel, by: self)
            } else {
                registry.admission.releaseWaitingReservation(of: self)
            }
            return headers
        case .listen(let headers, let contactID):
            state = .listening(contactID)
            registry.admission.upgraded(self)
            registry.admission.releaseWaitingReservation(of: self)
            return headers
        case .reject(let rejection):
            registry.admission.releaseWaitingReservation(of: self)
            state = .rejected(rejection)
            return nil
        }
    }

    /// The 101 went out (written by `requestHandler`, whose context this is): replace the HTTP
    /// handlers with the WebSocket side of the connection and attach it to its tunnel (or, for a
    /// phone's push channel, to the contact directory). Bytes the client sent behind its request
    /// reach the WebSocket side when the request decoder is removed, last.
    func upgraded(registry: RelayRegistry, context requestHandler: ChannelHandlerContext) throws {
        let configuration = registry.configuration
        let operations = channel.pipeline.syncOperations
        let requestDecoder = try operations.handler(type: ByteToMessageHandler<FirstRequestDecoder>.self)
        let upgrade = state
        switch upgrade {
        case .listening, .reserved: break
        default: throw ChannelError.inappropriateOperationForState
        }
        state = .upgraded
        requestHead = nil  // only a refusal needs it; an open connection keeps no headers
        if case .listening(let contactID) = upgrade {
            let handler = ListenerHandler(
                directory: registry.directory, contactID: contactID,
                closeHandshakeTimeout: configuration.closeHandshakeTimeout)
            try operations.addHandlers(
                Self.checkedFrameHandlers(maxFragments: 16, maxMessageSize: 4096, maxFrameSize: configuration.maxMessageSize)
                    + [WebSocketFrameEncoder(), handler])
            operations.removeHandler(context: requestHandler, promise: nil)
            registry.directory.attach(handler, contactID: contactID)
            operations.removeHandler(requestDecoder, promise: nil)
            return
        }
        guard case .reserved(let tunnel, let side) = upgrade else { return }
        // One handler reads, checks and joins the frames and relays them; with fault injection
        // NIO's decoder and the checks and the joining come first, as separate handlers, so the
        // fault handler sees whole messages.
        let faults = configuration.faults.isEnabled
        let handler = RelayPeerHandler(tunnel: tunnel, side: side, assemblesMessages: !faults)
        if faults {
            let feed = RelayFrameFeed(peer: handler)
            try operations.addHandlers(
                Self.checkedFrameHandlers(
                    maxFragments: MessageAssembler.maxFragments, maxMessageSize: configuration.maxMessageSize,
                    maxFrameSize: configuration.maxMessageSize)
                    + [feed, handler])
            try FaultInjectionHandler.install(on: channel, before: feed, tunnel: tunnel, side: side, registry: registry)
        } else {
            try operations.addHandler(handler)
        }
        operations.removeHandler(context: requestHandler, promise: nil)
        tunnel.attach(side, handler: handler)
        // NIO removes a decoder on a later loop turn, handing its held bytes on then, as a read
        // without the `channelReadComplete` that would flush what they carried: flush after it.
        let decoderRemoved = channel.eventLoop.makePromise(of: Void.self)
        decoderRemoved.futureResult.assumeIsolated().whenComplete { _ in tunnel.readBurstEnded(side) }
        operations.removeHandler(requestDecoder, promise: decoderRemoved)
    }
}

/// NIO's HTTP request decoder, limited to the first request of a connection.
///
/// Once that request's end has been seen (``RelayConnection/requestComplete``), later bytes are
/// not parsed: they stay buffered and, when the upgrade removes the decoder, go on as raw bytes to
/// the WebSocket (what NIO's decoder does by itself when the request carried `Connection: upgrade`,
/// which makes its parser stop; without that header it would go on parsing the next request). Parts
/// of a second request that arrived in the same read as the first are parsed in the same pass;
/// ``RelayRequestHandler`` drops those (and is removed before this decoder, so the raw bytes go
/// past it).
final class FirstRequestDecoder: ByteToMessageDecoder {
    typealias InboundOut = HTTPServerRequestPart

    private let parser = HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes)
    private let connection: RelayConnection
    /// Bytes handed to the parser before the request's head was complete. llhttp bounds one
    /// header line (80 KiB), not the whole head: many short lines could make it any size.
    private var headBytes = 0
    /// What the parser left in the buffer last time (counted already; it comes again).
    private var unconsumed = 0
    /// The head's lines as they arrived, for a specific reason when the parser refuses the request
    /// (a bare LF, `Transfer-Encoding` faults: llhttp reports both as `unknown`).
    private(set) var headScan = RequestHeadScan()

    /// The most a request's head may take, its lines together (the relay answers 431 beyond).
    static let maximumHeadSize = 80 * 1024

    init(connection: RelayConnection) {
        self.connection = connection
    }

    func decoderAdded(context: ChannelHandlerContext) {
        parser.decoderAdded(context: context)
    }

    func decoderRemoved(context: ChannelHandlerContext) {
        parser.decoderRemoved(context: context)
    }

    func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard !connection.requestComplete else { return .needMoreData }
        if buffer.readableBytes > 0 { connection.requestStarted = true }
        if connection.requestHead == nil {
            let arrived = buffer.readableBytes - unconsumed
            headBytes += arrived
            if arrived > 0 { headScan.read(buffer.readableBytesView.suffix(arrived)) }
            // What the parser has not yet turned into a head is over the bound: answered as
            // llhttp's own overflow is, 431 (RelayRequestHandler).
            if headBytes > Self.maximumHeadSize { throw HTTPParserError.headerOverflow }
        }
        defer { unconsumed = buffer.readableBytes }
        do {
            _ = try parser.decode(context: context, buffer: &buffer)
        } catch where connection.requestComplete {
            // What followed the first request in this read is not HTTP (a client without
            // `Connection: Upgrade` that sent a frame before the 101): the parser cannot say where
            // the request ended, so the read's remaining bytes are dropped (Docs/RELAY.md).
            buffer.moveReaderIndex(to: buffer.writerIndex)
        }
        return .needMoreData
    }

    func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        guard connection.requestComplete else {
            return try parser.decodeLast(context: context, buffer: &buffer, seenEOF: seenEOF)
        }
        // At EOF the bytes still go on once the connection is upgraded: the WebSocket side is next
        // and sees them before the connection's end (a client may send its message and half-close).
        if buffer.readableBytes > 0 && (!seenEOF || connection.isUpgraded) {
            let rest = buffer.readSlice(length: buffer.readableBytes)!
            context.fireChannelRead(NIOAny(rest))
        }
        return .needMoreData
    }
}

extension RelayConnection {
    /// NIO's frame decoder, ``MaskedFrameValidator`` and NIO's aggregator: the checked, whole
    /// messages a phone's push channel and a fault-injecting tunnel connection read (a plain tunnel
    /// connection's ``RelayPeerHandler`` does all three itself).
    fileprivate static func checkedFrameHandlers(maxFragments: Int, maxMessageSize: Int, maxFrameSize: Int) -> [any ChannelHandler] {
        [
            ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: maxFrameSize)),
            MaskedFrameValidator(),
            NIOWebSocketFrameAggregator(
                minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: maxFragments, maxAccumulatedFrameSize: maxMessageSize),
        ]
    }
}
