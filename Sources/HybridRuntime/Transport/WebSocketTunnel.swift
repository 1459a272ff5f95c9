import CTAP2
import HybridCore
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

/// One end of a caBLE tunnel over a real WebSocket connection to the tunnel service.
///
/// ``open(url:timeout:options:group:logger:)`` offers the `fido.cable` subprotocol, sends `Origin`,
/// requires the 101 to select `fido.cable` and reads `X-caBLE-Routing-ID`. A refused upgrade
/// throws ``RuntimeError`` `.upgradeRejected` with the HTTP status (404, 409, 410, 400, 503).
/// Frames are masked; fragmented messages are reassembled; pings are answered.
///
/// Every failure path closes the connection, and dropping the object closes it too.
public final class WebSocketTunnel: TunnelTransport {
    /// Settings of ``open(url:timeout:options:group:logger:)``.
    public struct Options: Sendable {
        /// `Origin` header; default `ws://HOST:PORT` of the URL (what webauthn-rs and Chromium send for their URL).
        public var origin: String?
        /// Largest message accepted from the relay; larger closes with 1009. Default 1 MiB (as Chromium).
        public var maxIncomingMessageSize = 1 << 20
        /// How long one ``send(_:)`` may wait for the socket before the connection is dropped. Default 10 s.
        public var sendTimeout: Duration = .seconds(10)
        /// How long ``close(code:reason:)`` waits for the relay's close frame. Default 2 s.
        public var closeTimeout: Duration = .seconds(2)
        /// More request headers, e.g. `X-caBLE-Client-Payload` on `/cable/contact/…`. Default none.
        public var extraHeaders: [(String, String)] = []
        /// Test hook: leave out `Sec-WebSocket-Protocol: fido.cable` from the request.
        package var offersSubprotocol = true

        /// The defaults.
        public init() {}
    }

    /// The routing ID from the 101's `X-caBLE-Routing-ID` header (3 bytes), if the relay sent one
    /// (it does for `/cable/new`).
    public let routingID: [UInt8]?
    /// The request path this tunnel was opened with.
    public let path: String

    private let channel: Channel
    private let handler: NIOLoopBound<ClientFrameHandler>
    private let inbox: MessageInbox<[UInt8]>
    private let options: Options
    private let logger: Logger

    private init(
        channel: Channel,
        handler: NIOLoopBound<ClientFrameHandler>,
        inbox: MessageInbox<[UInt8]>,
        routingID: [UInt8]?,
        path: String,
        options: Options,
        logger: Logger
    ) {
        self.channel = channel
        self.handler = handler
        self.inbox = inbox
        self.routingID = routingID
        self.path = path
        self.options = options
        self.logger = logger
    }

    deinit {
        // Safety net: a tunnel dropped without close() must not leak its socket.
        channel.close(promise: nil)
    }

    // MARK: - Opening

    /// Opens a tunnel connection to `url` (`ws://HOST:PORT/cable/…`).
    ///
    /// - Parameters:
    ///   - url: the tunnel service URL with its `/cable/new`, `/cable/connect`, `/cable/contact`
    ///     or `/cable/listen` path.
    ///   - timeout: covers the TCP connect and the HTTP upgrade.
    ///   - options: request headers and message limits.
    ///   - group: the event loop group the connection runs on.
    ///   - logger: where the connection's progress is logged.
    /// - Throws: ``RuntimeError`` `.invalidAddress`, `.connectionFailed`, `.timeout`,
    ///   `.upgradeRejected` (with ``RuntimeError/httpStatus``) or `.handshakeFailed`.
    public static func open(
        url: String,
        timeout: Duration = .seconds(10),
        options: Options = Options(),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "hybrid-sim.tunnel")
    ) async throws -> WebSocketTunnel {
        let target = try WebSocketURL(parsing: url)
        return try await open(
            host: target.host,
            port: target.port,
            path: target.path,
            timeout: timeout,
            options: options,
            group: group,
            logger: logger
        )
    }

    /// Opens a tunnel connection to `path` on `host:port`; see ``open(url:timeout:options:group:logger:)``.
    public static func open(
        host: String,
        port: Int,
        path: String,
        timeout: Duration = .seconds(10),
        options: Options = Options(),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "hybrid-sim.tunnel")
    ) async throws -> WebSocketTunnel {
        var logger = logger
        logger[metadataKey: "endpoint"] = "\(TunnelServicePath.endpointName(of: path))"
        let start = ContinuousClock.now
        let inbox = MessageInbox<[UInt8]>(timerLoop: group.next())
        let pending: PendingUpgrade
        do {
            let bootstrap = ClientBootstrap(group: group)
                .connectTimeout(TimeAmount(timeout))
                .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            let initialize: @Sendable (Channel) -> EventLoopFuture<PendingUpgrade> = { channel in
                channel.eventLoop.makeCompletedFuture {
                    var pending = try Self.configure(
                        channel, host: host, port: port, path: path, inbox: inbox, options: options)
                    // The rest of the budget is for the upgrade; closing the channel fails the
                    // upgrade future. Armed and disarmed on the event loop, so an upgrade that
                    // completed in time is never undone because the task resumed late, and
                    // without a hop of its own. Never optional: without it a relay that accepts
                    // the TCP connection and then says nothing would hold this upgrade forever.
                    let remaining = max(timeout - (ContinuousClock.now - start), .zero)
                    let timer = channel.eventLoop.scheduleTask(in: TimeAmount(remaining)) {
                        channel.close(promise: nil)
                    }
                    pending.outcome.whenSuccess { result in
                        if case .upgraded = result { timer.cancel() }
                    }
                    channel.closeFuture.whenComplete { _ in timer.cancel() }
                    pending.timer = timer
                    return pending
                }
            }
            // An IP address needs no resolver (NIO's resolver and Happy Eyeballs cost a thread hop
            // and timers per connection); a name such as localhost goes through them.
            if let address = try? SocketAddress(ipAddress: host, port: port) {
                pending = try await bootstrap.connect(to: address, channelInitializer: initialize)
            } else {
                pending = try await bootstrap.connect(host: host, port: port, channelInitializer: initialize)
            }
        } catch let error as RuntimeError {
            throw error
        } catch {
            if ContinuousClock.now - start >= timeout {
                throw RuntimeError.timeout("connecting to \(host):\(port)", after: timeout)
            }
            throw RuntimeError(.connectionFailed, "could not connect to the relay at \(host):\(port): \(RuntimeError.systemReason(error))")
        }

        let channel = pending.channel
        defer { pending.timer?.cancel() }
        do {
            switch try await pending.outcome.get() {
            case .upgraded(let head, let handler):
                let routingID = try Self.validate(head, path: path)
                logger.debug("tunnel open")
                return WebSocketTunnel(
                    channel: channel,
                    handler: handler,
                    inbox: inbox,
                    routingID: routingID,
                    path: path,
                    options: options,
                    logger: logger
                )
            case .rejected(let response):
                let (status, body) = try await response.get()
                try? await channel.close().get()
                throw RuntimeError.upgradeRejected(
                    path: path,
                    status: Int(status.code),
                    statusText: status.reasonPhrase,
                    detail: body
                )
            }
        } catch let error as RuntimeError {
            try? await channel.close().get()
            throw error
        } catch {
            try? await channel.close().get()
            // No response head came (none in time, or the connection closed first): an answer that
            // came and was wrong is a RuntimeError caught above.
            var unanswered =
                ContinuousClock.now - start >= timeout
                ? RuntimeError.timeout("WebSocket upgrade of \(TunnelServicePath.endpointName(of: path))", after: timeout)
                : RuntimeError(
                    .handshakeFailed,
                    "WebSocket upgrade of \(TunnelServicePath.endpointName(of: path)) failed: \(RuntimeError.systemReason(error))")
            unanswered.unansweredUpgrade = true
            throw unanswered
        }
    }

    /// The 101 must select `fido.cable`; a routing ID header, if present, must be exactly one 6-hex value.
    private static func validate(_ head: HTTPResponseHead, path: String) throws -> [UInt8]? {
        let endpoint = TunnelServicePath.endpointName(of: path)
        let selected = head.headers["Sec-WebSocket-Protocol"]
        if selected.count > 1 {
            throw RuntimeError(
                .handshakeFailed,
                "relay sent \(selected.count) Sec-WebSocket-Protocol headers for \(endpoint) (\(PeerText.printable(selected.joined(separator: ", ")))); it must select one, fido.cable"
            )
        }
        guard selected == [HybridConstants.webSocketProtocol] else {
            let got = selected.isEmpty ? "none" : PeerText.printable(selected.joined(separator: ", "))
            throw RuntimeError(
                .handshakeFailed,
                "relay did not select the fido.cable subprotocol for \(endpoint) (got \(got))"
            )
        }
        let routing = head.headers[HybridConstants.routingIDHeader]
        guard !routing.isEmpty else { return nil }
        // Chromium fails on a doubled header too, identical values or not (Docs/PROTOCOL-TOLERANCE.md).
        guard routing.count == 1 else {
            throw RuntimeError(
                .handshakeFailed,
                "relay sent \(routing.count) X-caBLE-Routing-ID headers (\(PeerText.printable(routing.joined(separator: ", ")))); exactly one is allowed, as Chromium requires"
            )
        }
        guard let bytes = Hex.decode(routing[0].trimmingSpaces, byteCount: HybridConstants.routingIDSize)
        else {
            throw RuntimeError(
                .handshakeFailed,
                "relay sent a malformed X-caBLE-Routing-ID: \(PeerText.printable(routing.joined(separator: ", ")))"
            )
        }
        return bytes
    }

    // MARK: - TunnelTransport

    /// Sends one binary message (masked).
    ///
    /// - Throws: `.closed` once the tunnel was closed (by either side), `.timeout` if the socket did
    ///   not take the message within ``Options/sendTimeout`` (the connection is then dropped).
    public func send(_ message: [UInt8]) async throws {
        try await write(opcode: .binary, data: message, fin: true, masked: true)
    }

    /// Sends binary messages (masked) in one write to the socket; throws like ``send(_:)``.
    public func send(contentsOf messages: [[UInt8]]) async throws {
        try await write { $0.write(messages: messages) }
    }

    /// The next binary message; `.timeout` after `timeout`, `.closed(code, reason)` once the relay or
    /// the peer closed and all earlier messages were returned, `.protocolViolation` on a text frame.
    public func receive(timeout: Duration) async throws -> [UInt8] {
        try await inbox.next(timeout: timeout, operation: "receive from \(TunnelServicePath.endpointName(of: path))")
    }

    /// The next message if it has already arrived; `nil` otherwise.
    public func receiveIfReady() -> [UInt8]? { inbox.nextIfReady() }

    /// Returns once a message or the end is waiting to be read, or the calling task is cancelled.
    public func awaitIncoming() async { await inbox.awaitInput() }

    /// Ends the inbox with `error`: a waiting (or the next) ``receive(timeout:)`` throws it, as
    /// when the connection is lost (the socket stays open for ``close()``). The phone's way to stop
    /// waiting for a desktop its advert cannot reach.
    package func end(with error: RuntimeError) { inbox.finish(error) }

    /// Closes normally (1000).
    public func close() async {
        await close(code: .normalClosure)
    }

    /// Sends a close frame with `code`, waits up to ``Options/closeTimeout`` for the relay's answer,
    /// then makes sure the socket is closed. Idempotent; never throws.
    public func close(code: WebSocketCloseCode, reason: String = "") async {
        let handler = self.handler
        if handler.eventLoop.inEventLoop {
            handler.value.initiateClose(code: code, reason: reason)
        } else {
            handler.eventLoop.execute { handler.value.initiateClose(code: code, reason: reason) }
        }
        let channel = self.channel
        let timer = channel.eventLoop.scheduleTask(in: TimeAmount(options.closeTimeout) + .milliseconds(100)) {
            channel.close(promise: nil)
        }
        try? await channel.closeFuture.get()
        timer.cancel()
    }

    /// Closes the socket at once, without a closing handshake: for a connection known dead, whose
    /// answer to a close frame would never come.
    package func abort() async {
        try? await channel.close().get()
    }

    /// Test hook: writes one raw frame (e.g. a text frame or a fragment) to the relay.
    package func sendFrame(opcode: WebSocketOpcode, data: [UInt8], fin: Bool = true, masked: Bool = true) async throws {
        try await write(opcode: opcode, data: data, fin: fin, masked: masked)
    }

    /// How long since the relay last sent anything (a message, a ping, a pong): a connection that
    /// stays silent after a ``ping()`` is gone without having said so (a NAT entry dropped).
    package var silence: Duration { inbox.silence }

    /// When the relay last sent anything (NIO's clock).
    package var lastHeard: NIODeadline { inbox.lastHeardAt }

    /// Sends a ping (empty); the relay's pong counts as hearing from it (``silence``).
    package func ping() async throws {
        try await write(opcode: .ping, data: [], fin: true, masked: true)
    }

    /// Messages received but not yet returned by ``receive(timeout:)``.
    public var pendingMessageCount: Int { inbox.pendingCount }

    /// How the tunnel ended, once it has (the peer's close or the connection lost): what
    /// ``receive(timeout:)`` throws after the ``pendingMessageCount`` messages already here; `nil`
    /// while it is open.
    package var endedWith: RuntimeError? { inbox.terminalError }

    /// Returns once a ``receive(timeout:)`` is waiting (or the tunnel has ended): a hand-off for
    /// tests that need a receive to be pending before they act.
    func receiveIsWaiting() async { await inbox.readerIsWaiting() }

    private func write(opcode: WebSocketOpcode, data: [UInt8], fin: Bool, masked: Bool) async throws {
        try await write { $0.write(opcode: opcode, data: data, fin: fin, masked: masked) }
    }

    /// Runs `perform` with the frame handler on the connection's loop and waits until what it
    /// wrote is written, at most ``Options/sendTimeout`` (then the connection is dropped).
    private func write(_ perform: @escaping @Sendable (ClientFrameHandler) -> EventLoopFuture<Void>) async throws {
        if let terminal = inbox.terminalError { throw terminal }
        let handler = self.handler
        let channel = self.channel
        let sendTimeout = options.sendTimeout
        let start = ContinuousClock.now
        let written: EventLoopFuture<Void>
        if handler.eventLoop.inEventLoop {
            // Already on the connection's loop (a driver task with SwiftNIO's loops as the
            // executor): write in place. A loopback socket takes the frames within the call, so the
            // write is usually complete here and there is nothing to wait for or to time.
            let done: Result<Void, any Error>?
            (written, done) = Self.writeInPlace(handler, perform)
            switch done {
            case .success?: return
            case .failure(let error)?: throw writeError(error, start: start, sendTimeout: sendTimeout)
            case nil: break
            }
        } else {
            written = handler.eventLoop.flatSubmit { perform(handler.value) }
        }
        let timer = channel.eventLoop.scheduleTask(in: TimeAmount(sendTimeout)) { channel.close(promise: nil) }
        defer { timer.cancel() }
        // Disarmed on the event loop when the write completes, not when this task resumes.
        written.whenComplete { _ in timer.cancel() }
        do {
            try await written.get()
        } catch {
            throw writeError(error, start: start, sendTimeout: sendTimeout)
        }
    }

    /// Runs `perform` on the connection's loop (the caller is on it); returns the write and its
    /// result if it already completed.
    private static func writeInPlace(
        _ handler: NIOLoopBound<ClientFrameHandler>, _ perform: (ClientFrameHandler) -> EventLoopFuture<Void>
    ) -> (EventLoopFuture<Void>, Result<Void, any Error>?) {
        let written = perform(handler.value)
        var done: Result<Void, any Error>? = nil
        written.assumeIsolated().whenComplete { done = $0 }
        return (written, done)
    }

    /// What a failed write throws: the ``RuntimeError`` itself, a timeout once the send timer
    /// fired, else the tunnel's terminal error (or an abnormal closure).
    private func writeError(_ error: any Error, start: ContinuousClock.Instant, sendTimeout: Duration) -> RuntimeError {
        if let error = error as? RuntimeError { return error }
        if ContinuousClock.now - start >= sendTimeout {
            return RuntimeError.timeout("send to \(TunnelServicePath.endpointName(of: path))", after: sendTimeout)
        }
        return inbox.terminalError ?? RuntimeError.closed(.abnormalClosure, "connection lost: \(RuntimeError.systemReason(error))")
    }
}

extension String {
    /// The string without leading and trailing spaces and tabs.
    fileprivate var trimmingSpaces: Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return self[first...last]
    }
}
