import NIOCore
import NIOHTTP1
import NIOWebSocket

/// What the typed HTTP upgrade pipeline reports for a relay connection.
enum RelayUpgradeResult: Sendable {
    /// The connection became a tunnel peer.
    case upgraded
    /// The connection was answered with an HTTP error.
    case rejected
}

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
    /// Whether the parse that produced the first request's end is over: from here on, what passes
    /// ``RequestHeadRecorder`` is raw bytes, not HTTP parts (``FirstRequestDecoder``).
    var requestPartsDelivered = false
    /// The peer's IP address, which the per-source caps count under (``AdmissionLedger``).
    let source: String?
    /// How the ``AdmissionLedger`` counts this connection.
    var admission = AdmissionState.notCounted
    /// The source whose unjoined-tunnel count holds a place for this connection's request
    /// (``RelayConfiguration/maxWaitingTunnelsPerSource``), until the tunnel opens or the request fails.
    var waitingReservation: String?
    private var upgradeTimer: Scheduled<Void>?

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
        }
        if let refusal {
            // Pending-upgrade or per-source cap: not tracked, answered like an over-capacity connection.
            registry.connectionClosed(connection)
            registry.statistics.update { $0.rejectedRequests[refusal.status, default: 0] += 1 }
            let limiter = OverCapacityHandler(response: refusal.response, closeTimeout: registry.configuration.closeHandshakeTimeout)
            try channel.pipeline.syncOperations.addHandler(limiter)
            return
        }
        channel.closeFuture.assumeIsolated().whenComplete { _ in
            connection.upgradeTimer?.cancel()
            registry.admission.closed(connection)
            registry.connectionClosed(connection)
            registry.admission.idleTrim.connectionClosed(on: channel.eventLoop) { registry.statistics.openConnectionCount }
        }
        let timeout = registry.configuration.upgradeTimeout
        connection.upgradeTimer = channel.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(timeout)) {
            guard !connection.isUpgraded else { return }
            registry.logger.debug(
                "dropping a connection that did not complete its request within \(timeout.humanReadable)"
            )
            channel.close(promise: nil)
        }

        let loop = channel.eventLoop
        let boundRegistry = NIOLoopBound(registry, eventLoop: loop)
        let boundConnection = NIOLoopBound(connection, eventLoop: loop)
        let configuration = registry.configuration
        let upgrader = NIOTypedWebSocketServerUpgrader<RelayUpgradeResult>(
            maxFrameSize: configuration.maxMessageSize,
            enableAutomaticErrorHandling: false,
            shouldUpgrade: { channel, head in
                if let refusal = boundRegistry.value.admission.waitingTunnelRefusal(
                    for: head, from: boundConnection.value, configuration: configuration)
                {
                    return channel.eventLoop.makeSucceededFuture(boundConnection.value.shouldUpgrade(.reject(refusal), registry: boundRegistry.value))
                }
                // A contact request may wait (bounded) for its phone; everything else is decided at once.
                return boundRegistry.value.decision(for: head).map { decision in
                    boundConnection.value.shouldUpgrade(decision, registry: boundRegistry.value)
                }
            },
            upgradePipelineHandler: { channel, _ in
                channel.eventLoop.makeCompletedFuture {
                    try boundConnection.value.upgraded(configuration: configuration, registry: boundRegistry.value)
                }
            }
        )
        let upgradeConfiguration = NIOTypedHTTPServerUpgradeConfiguration<RelayUpgradeResult>(
            upgraders: [upgrader],
            notUpgradingCompletionHandler: { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = RelayRejectHandler(connection: boundConnection.value, registry: boundRegistry.value)
                    try channel.pipeline.syncOperations.addHandler(handler)
                    return .rejected
                }
            }
        )
        try installHTTPPipeline(
            on: channel, connection: connection, maxMessageSize: configuration.maxMessageSize,
            upgradeConfiguration: upgradeConfiguration)
    }

    /// The HTTP half of the pipeline: NIO's response encoder, a decoder that parses only the first
    /// request (``FirstRequestDecoder``), NIO's response-header validator and protocol-error handler,
    /// ``RequestHeadRecorder``, and NIO's typed upgrade handler.
    ///
    /// Built by hand rather than with `configureUpgradableHTTPServerPipeline` for two reasons. A
    /// connection carries one request (the upgrade, or a request that is answered and closed), so
    /// there is no HTTP pipelining handler. And a second request sent right behind an upgrade request
    /// must never reach the upgrade handler: it buffers what arrives while the upgrade runs and
    /// replays it into the WebSocket frame decoder afterwards, which traps on an HTTP part
    /// (a remote abort of the relay, found by fuzzing; Tests/Fuzz/Regressions/relay-request).
    private static func installHTTPPipeline(
        on channel: Channel, connection: RelayConnection, maxMessageSize: Int,
        upgradeConfiguration: NIOTypedHTTPServerUpgradeConfiguration<RelayUpgradeResult>
    ) throws {
        let operations = channel.pipeline.syncOperations
        let responseEncoder = HTTPResponseEncoder()
        // Bounds what a client can make the relay hold: bytes sent behind the request while the
        // upgrade is decided (a contact request waits for its phone) stay in this buffer.
        let requestDecoder = ByteToMessageHandler(
            FirstRequestDecoder(connection: connection),
            maximumBufferSize: 16 * 1024 + maxMessageSize
        )
        let headerValidator = NIOHTTPResponseHeadersValidator()
        let errorHandler = HTTPServerProtocolErrorHandler()
        try operations.addHandler(responseEncoder)
        try operations.addHandler(requestDecoder)
        try operations.addHandler(headerValidator)
        try operations.addHandler(errorHandler)
        // The upgrade handler swallows the request of a failed upgrade; the recorder keeps it for the answer.
        try operations.addHandler(RequestHeadRecorder(connection: connection))
        try operations.addHandler(
            NIOTypedHTTPServerUpgradeHandler(
                httpEncoder: responseEncoder,
                extraHTTPHandlers: [requestDecoder, headerValidator, errorHandler],
                upgradeConfiguration: upgradeConfiguration
            )
        )
    }

    /// `shouldUpgrade` of the WebSocket upgrader: the 101's extra headers, or `nil` to refuse.
    private func shouldUpgrade(_ decision: UpgradeDecision, registry: RelayRegistry) -> HTTPHeaders? {
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

    /// The 101 went out: install the peer handler (behind the fault handlers, if any), then attach to the tunnel.
    private func upgraded(configuration: RelayConfiguration, registry: RelayRegistry) throws -> RelayUpgradeResult {
        if case .listening(let contactID) = state {
            return try upgradedListener(contactID: contactID, configuration: configuration, registry: registry)
        }
        guard case .reserved(let tunnel, let side) = state else {
            throw ChannelError.inappropriateOperationForState
        }
        state = .upgraded
        upgradeTimer?.cancel()
        upgradeTimer = nil
        requestHead = nil  // only a refusal needs it; an open tunnel keeps no headers
        try removeRequestRecorder()
        // One handler checks and joins the frames and relays them; with fault injection the checks
        // and the joining come first, as separate handlers, so the fault handler sees whole messages.
        let faults = configuration.faults.isEnabled
        let handler = RelayPeerHandler(
            tunnel: tunnel,
            side: side,
            assemblesMessages: !faults
        )
        if faults {
            try channel.pipeline.syncOperations.addHandlers(
                MaskedFrameValidator(),
                NIOWebSocketFrameAggregator(
                    minNonFinalFragmentSize: 0,
                    maxAccumulatedFrameCount: MessageAssembler.maxFragments,
                    maxAccumulatedFrameSize: configuration.maxMessageSize
                ),
                handler
            )
            try FaultInjectionHandler.install(on: channel, before: handler, tunnel: tunnel, side: side, registry: registry)
        } else {
            try channel.pipeline.syncOperations.addHandler(handler)
        }
        tunnel.attach(side, handler: handler)
        return .upgraded
    }
}

extension RelayConnection {
    /// The connection is upgraded: the request recorder has nothing left to do.
    fileprivate func removeRequestRecorder() throws {
        let recorder = try channel.pipeline.syncOperations.handler(type: RequestHeadRecorder.self)
        channel.pipeline.syncOperations.removeHandler(recorder, promise: nil)
    }

    /// A phone's push channel is up: install the frame handlers and register it as listening.
    fileprivate func upgradedListener(
        contactID: [UInt8], configuration: RelayConfiguration, registry: RelayRegistry
    ) throws -> RelayUpgradeResult {
        state = .upgraded
        upgradeTimer?.cancel()
        upgradeTimer = nil
        requestHead = nil
        try removeRequestRecorder()
        let handler = ListenerHandler(
            directory: registry.directory, contactID: contactID, closeHandshakeTimeout: configuration.closeHandshakeTimeout)
        try channel.pipeline.syncOperations.addHandlers(
            MaskedFrameValidator(),
            NIOWebSocketFrameAggregator(
                minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: 16, maxAccumulatedFrameSize: 4096),
            handler
        )
        registry.directory.attach(handler, contactID: contactID)
        return .upgraded
    }
}

/// Answers a request that is not upgraded (refused, malformed or plain HTTP) with a short text
/// response and closes the connection.
final class RelayRejectHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let connection: RelayConnection
    private let registry: RelayRegistry
    private var answered = false

    init(connection: RelayConnection, registry: RelayRegistry) {
        self.connection = connection
        self.registry = registry
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // After a refused upgrade the request was already consumed: answer now.
        if connection.requestComplete { respond(context: context) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .end = unwrapInboundIn(data) { respond(context: context) }
    }

    private func respond(context: ChannelHandlerContext) {
        guard !answered else { return }
        answered = true
        let rejection: RelayRejection
        if case .rejected(let decided) = connection.state {
            rejection = decided
        } else if let head = connection.requestHead {
            rejection = registry.rejectionForPlainRequest(head)
            connection.state = .rejected(rejection)
        } else {
            rejection = RelayRejection(status: .badRequest, reason: "malformed request")
            connection.state = .rejected(rejection)
        }
        registry.recordRejected(rejection)
        let body = context.channel.allocator.buffer(string: rejection.reason + "\n")
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        headers.add(name: "Connection", value: "close")
        let responseHead = HTTPResponseHead(version: .http1_1, status: rejection.status, headers: headers)
        context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
        // A response to HEAD has no body (its Content-Length still says how long it would be).
        if connection.requestHead?.method != .HEAD {
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        }
        let channel = context.channel
        // A client that does not read could keep the write (and the connection) pending forever.
        let timer = context.eventLoop.assumeIsolated().scheduleTask(
            in: TimeAmount(registry.configuration.closeHandshakeTimeout)
        ) {
            channel.close(promise: nil)
        }
        channel.closeFuture.whenComplete { _ in timer.cancel() }
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            channel.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }
}

/// Records the first request's head and end for ``RelayRejectHandler``, and keeps anything a client
/// sends behind that request away from the upgrade handler.
///
/// After the first request's end, HTTP parts of a second (pipelined) request are dropped: the relay
/// answers one request per connection, and the upgrade handler would replay them into the WebSocket
/// decoder. Raw bytes pass: they are what the client sent behind its upgrade request, forwarded by
/// ``FirstRequestDecoder`` when the upgrade removes it, and belong to the WebSocket. Removed once the
/// connection is upgraded.
final class RequestHeadRecorder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    private let connection: RelayConnection

    init(connection: RelayConnection) {
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if connection.requestComplete {
            // Not unwrapped: before `requestPartsDelivered` these are HTTP parts, after it raw bytes.
            if connection.requestPartsDelivered { context.fireChannelRead(data) }
            return
        }
        switch unwrapInboundIn(data) {
        case .head(let head):
            connection.requestHead = head
        case .body:
            break
        case .end:
            connection.requestComplete = true
        }
        context.fireChannelRead(data)
    }

    /// Errors of the HTTP decoder. When what the decoder holds outgrew its bound (a request head
    /// or, while the upgrade is decided, the bytes behind the request; ``FirstRequestDecoder``), the
    /// connection is closed: what it sent can no longer be handled whole, and NIO's decoder drops
    /// every later read. Before the first request's end any other error goes on (NIO's
    /// protocol-error handler answers 400); after it, it concerns a request the relay drops anyway
    /// and is dropped too, so a refusal being written is not cut short by a second answer.
    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if error is ByteToMessageDecoderError.PayloadTooLargeError {
            context.close(promise: nil)
        } else if let decoderError = error as? ByteToMessageDecoderError,
            case .dataReceivedInErrorState = decoderError
        {
            context.close(promise: nil)
        } else if !connection.requestComplete {
            context.fireErrorCaught(error)
        }
    }
}

/// NIO's HTTP request decoder, limited to the first request of a connection.
///
/// Once that request's end has been seen (``RelayConnection/requestComplete``), later bytes are
/// not parsed: they stay buffered and, when the upgrade removes the decoder, go on as raw bytes to
/// the WebSocket (what NIO's decoder does by itself when the request carried `Connection: upgrade`,
/// which makes its parser stop; without that header it would go on parsing the next request). Parts
/// of a second request that arrived in the same read as the first are parsed in the same pass;
/// ``RequestHeadRecorder`` drops those, and this decoder tells it when that pass is over
/// (``RelayConnection/requestPartsDelivered``).
final class FirstRequestDecoder: ByteToMessageDecoder {
    typealias InboundOut = HTTPServerRequestPart

    private let parser = HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes)
    private let connection: RelayConnection

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
        do {
            _ = try parser.decode(context: context, buffer: &buffer)
        } catch where connection.requestComplete {
            // What followed the first request in this read is not HTTP (a client without
            // `Connection: Upgrade` that sent a frame before the 101): the parser cannot say where
            // the request ended, so the read's remaining bytes are dropped (Docs/RELAY.md).
            buffer.moveReaderIndex(to: buffer.writerIndex)
        }
        if connection.requestComplete { connection.requestPartsDelivered = true }
        return .needMoreData
    }

    func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        guard connection.requestComplete else {
            return try parser.decodeLast(context: context, buffer: &buffer, seenEOF: seenEOF)
        }
        connection.requestPartsDelivered = true
        if buffer.readableBytes > 0 && !seenEOF {
            let rest = buffer.readSlice(length: buffer.readableBytes)!
            context.fireChannelRead(NIOAny(rest))
        }
        return .needMoreData
    }
}
