import Foundation
import HybridCore
import NIOCore
import NIOHTTP1
import NIOWebSocket

/// The relay's HTTP half of a connection, behind ``FirstRequestDecoder``: records the one request a
/// connection carries, decides it, and either writes the `101 Switching Protocols` and turns the
/// connection into a tunnel peer (``RelayConnection/upgraded(registry:context:)``) or answers with a
/// short `text/plain` error and closes. Confined to the relay's event loop.
///
/// Written for the relay instead of NIO's typed upgrade handler, WebSocket upgrader, response encoder,
/// response-header validator and protocol-error handler, with the same decisions: the request is a
/// WebSocket upgrade when one of its `Upgrade` tokens is `websocket` (any case; `Connection: upgrade`
/// is not required, as with NIO) with exactly one `Sec-WebSocket-Key` and exactly one
/// `Sec-WebSocket-Version` of `13`; anything else is a plain request
/// (``RelayRegistry/rejectionForPlainRequest(_:invalidUpgrade:)``). Beyond NIO, an upgrade must also
/// be HTTP/1.1 with one `Host` and a key of 16 bytes (``upgrade(of:)``). A request the HTTP parser
/// cannot read gets a `400` naming the parser's complaint, or a `431` for a head over the parser's
/// 80 KiB. The responses are fixed texts written as
/// bytes: a connection has two handlers while it waits for its request instead of six, and none of
/// NIO's per-upgrade futures and header checks run.
///
/// After the first request's end, parts of a second (pipelined) request are dropped: the relay
/// answers one request per connection (Docs/RELAY.md, "One request per connection"). So that they
/// are, a 101 written during a read changes the pipeline only when that read is over
/// (`channelReadComplete`): until then the HTTP parser may still hand on parts of a request that
/// came in the same bytes. Bytes the client sent behind an upgrade request reach the WebSocket:
/// ``FirstRequestDecoder`` hands them on when the upgrade removes it, after this handler is gone.
final class RelayRequestHandler: ChannelInboundHandler, RemovableChannelHandler {
    /// Sent down the pipeline by the shard's upgrade timer (``RelayRegistry``) when it finds the
    /// request begun and not finished: answered `408`.
    struct RequestTimedOut {}
    /// Sent down the pipeline of each connection not yet upgraded when the relay shuts down: one
    /// whose request has begun is answered `503` (`relay shutting down`) rather than reset, one
    /// that sent no request yet is closed.
    struct ShuttingDown {}

    typealias InboundIn = HTTPServerRequestPart

    /// What a request the parser cannot read gets: `431` for a head beyond llhttp's 80 KiB, `400`
    /// in words for HTTP/2's preface (`.paused`: NIO handles llhttp's other pauses itself), for a
    /// request line without a known method, for a version other than 1.0 or 1.1, and for the
    /// framing faults `scan` saw in the head (a bare LF, `Transfer-Encoding` misused, or with
    /// `Content-Length`; llhttp reports some of them as `unknown`), otherwise `400` with the
    /// parser's complaint (NIO's protocol-error handler sends a bare `400`).
    static func malformedRejection(_ error: HTTPParserError, scan: RequestHeadScan) -> RelayRejection {
        switch error {
        case .headerOverflow:
            // llhttp's bound on one line and the relay's on the whole head are the same 80 KiB.
            return RelayRejection(
                status: .requestHeaderFieldsTooLarge, reason: "request head over \(FirstRequestDecoder.maximumHeadSize / 1024) KiB")
        case .paused:
            // llhttp stops at HTTP/2's connection preface ("PRI * HTTP/2.0").
            return RelayRejection(
                status: .badRequest, reason: "HTTP/2 is not spoken here: the relay takes HTTP/1.1 WebSocket upgrades (RFC 6455)")
        case .invalidMethod:
            // llhttp says so of any request line that does not start with a method it knows,
            // garbage included, so this stays 400 rather than RFC 9110 §9.1's 501 for a real one.
            return RelayRejection(
                status: .badRequest, reason: "not an HTTP request, or an HTTP method the relay does not know: every endpoint is a GET")
        default:
            return RelayRejection(status: .badRequest, reason: scan.reason(for: error) ?? "malformed HTTP request (\(error))")
        }
    }

    private let connection: RelayConnection
    private let registry: RelayRegistry
    /// The connection's request decoder, whose scan of the head explains a parser's refusal.
    private let decoder: FirstRequestDecoder
    private var answered = false
    /// Inside a read: between a `channelRead` and the `channelReadComplete` that ends its burst.
    private var reading = false
    /// The 101 went out during a read; the pipeline changes when the read is over.
    private var upgradePending = false

    init(connection: RelayConnection, registry: RelayRegistry, decoder: FirstRequestDecoder) {
        self.connection = connection
        self.registry = registry
        self.decoder = decoder
    }

    /// What a request head asks for (see the type's documentation).
    enum Upgrade: Equatable {
        /// A WebSocket upgrade the relay can answer with a 101: its `Sec-WebSocket-Key`.
        case upgrade(key: String)
        /// Not a WebSocket upgrade (no `Upgrade: websocket`, no single key, version not `13`).
        case plain
        /// A WebSocket upgrade that breaks a rule of RFC 6455 §4.1 the server must check (§4.2.1
        /// says `400`): why, for the refusal's body.
        case invalid(String)
    }

    /// Classifies `head`. An upgrade must be HTTP/1.1 or later with exactly one `Host` and a
    /// `Sec-WebSocket-Key` that is base64 of 16 bytes (RFC 6455 §4.1, §4.2.1). Every real client
    /// sends these; a hand-written one that does not learns which rule it broke instead of getting
    /// a tunnel a stricter tunnel service would refuse (Docs/PROTOCOL-TOLERANCE.md).
    static func upgrade(of head: HTTPRequestHead) -> Upgrade {
        guard head.headers.containsToken(named: "upgrade", "websocket", anyCase: true),
            let key = head.headers.onlyToken(named: "sec-websocket-key"),
            head.headers.onlyToken(named: "sec-websocket-version") == "13"
        else { return .plain }
        if head.version.major < 1 || (head.version.major == 1 && head.version.minor < 1) {
            return .invalid(
                "a WebSocket upgrade needs HTTP/1.1 (RFC 6455 §4.1); this request is HTTP/\(head.version.major).\(head.version.minor)")
        }
        let hosts = head.headers["host"].count
        if hosts != 1 {
            return .invalid("a WebSocket upgrade needs exactly one Host header (RFC 6455 §4.1); this request has \(hosts)")
        }
        guard let nonce = Data(base64Encoded: String(key)) else {
            return .invalid("Sec-WebSocket-Key must be base64 of 16 random bytes (RFC 6455 §4.1); it is not base64")
        }
        guard nonce.count == 16 else {
            return .invalid("Sec-WebSocket-Key must be base64 of 16 random bytes (RFC 6455 §4.1); it decodes to \(nonce.count)")
        }
        return .upgrade(key: String(key))
    }

    /// The content a GET announces, in words (`nil` for none or `Content-Length: 0`): a
    /// `Transfer-Encoding` of any kind, or a `Content-Length` above 0. Every real client sends a bare
    /// GET; the relay refuses one with content from its head (Docs/RELAY.md, "Endpoints").
    static func announcedBody(of head: HTTPRequestHead) -> String? {
        if head.headers.contains(name: "transfer-encoding") {
            return "a Transfer-Encoding"
        }
        // The parser has checked that the Content-Length is one number (several equal ones allowed).
        if let length = head.headers.first(name: "content-length"), length.contains(where: { $0 != "0" }) {
            return "\(PeerText.printable(length, limit: 20)) bytes"
        }
        return nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        reading = true
        // After the first request: parts of a pipelined request, dropped unread.
        guard !connection.requestComplete else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            connection.requestHead = head
            // Every endpoint is a GET: another method is answered from its head, without reading a
            // body it announces (or waiting for a 100 Continue its `Expect` asks for, RFC 9110 §10.1.1).
            if head.method != .GET {
                connection.requestComplete = true
                refuse(registry.rejectionForPlainRequest(head), context: context)
            } else if let announced = Self.announcedBody(of: head) {
                // No endpoint takes content (RFC 9110 §9.3.1 lets a server refuse it in a GET): refused
                // from the head too, rather than read and dropped until the upgrade timer's 408.
                connection.requestComplete = true
                refuse(
                    registry.rejectionForPlainRequest(head, announcedBody: announced), context: context)
            }
        case .body:
            // Only a `Content-Length: 0` GET gets here (``announcedBody(of:)``): nothing to read.
            break
        case .end:
            connection.requestComplete = true
            requestEnded(context: context)
        }
    }

    /// The shard's upgrade timer found the request unfinished (``RequestTimedOut``): answered `408`;
    /// whatever of it arrives later is dropped.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ShuttingDown {
            guard !answered else { return }  // its answer is on the way; the close timer ends it
            // Begun (a byte of it arrived), finished or not: answered, as the 408 timer tells them apart.
            guard connection.requestStarted || connection.requestHead != nil else {
                context.close(promise: nil)
                return
            }
            connection.requestComplete = true
            refuse(RelayRejection(status: .serviceUnavailable, reason: "relay shutting down"), context: context)
            return
        }
        guard event is RequestTimedOut else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        connection.requestComplete = true
        refuse(.requestTimeout(after: registry.configuration.upgradeTimeout), context: context)
    }

    /// The request is complete: decide it.
    private func requestEnded(context: ChannelHandlerContext) {
        guard let head = connection.requestHead else {
            refuse(RelayRejection(status: .badRequest, reason: "malformed request"), context: context)
            return
        }
        let key: String
        switch Self.upgrade(of: head) {
        case .upgrade(let offered):
            key = offered
        case .plain:
            refuse(registry.rejectionForPlainRequest(head), context: context)
            return
        case .invalid(let why):
            refuse(registry.rejectionForPlainRequest(head, invalidUpgrade: why), context: context)
            return
        }
        if let refusal = registry.admission.waitingTunnelRefusal(
            for: head, from: connection, configuration: registry.configuration)
        {
            decided(.reject(refusal), key: key, context: context)
            return
        }
        // A contact request may wait (bounded) for its phone; everything else is decided at once. The
        // future never fails: a refusal is a decision (`.reject`), and the contact wait's own timer
        // bounds the wait (the upgrade timer leaves a complete request to its decision).
        registry.decision(for: head, requester: context.channel).assumeIsolated().whenSuccess { decision in
            self.decided(decision, key: key, context: context)
        }
    }

    private func decided(_ decision: UpgradeDecision, key: String, context: ChannelHandlerContext) {
        // Answered meanwhile (the relay began shutting down while this request was decided).
        guard !answered else { return }
        guard let extraHeaders = connection.shouldUpgrade(decision, registry: registry) else {
            let rejection: RelayRejection
            if case .rejected(let decided) = connection.state {
                rejection = decided
            } else {
                rejection = registry.rejectionForPlainRequest(connection.requestHead!)
            }
            refuse(rejection, context: context)
            return
        }
        // NIO's upgrader's 101: the decision's headers, then Upgrade, Sec-WebSocket-Accept, Connection.
        var headers = extraHeaders
        headers.replaceOrAdd(name: "Upgrade", value: "websocket")
        headers.add(name: "Sec-WebSocket-Accept", value: WebSocketAccept.value(forKey: key))
        headers.replaceOrAdd(name: "Connection", value: "upgrade")
        var response = "HTTP/1.1 101 Switching Protocols\r\n"
        for (name, value) in headers { response += "\(name): \(value)\r\n" }
        response += "\r\n"
        answered = true
        context.writeAndFlush(NIOAny(context.channel.allocator.buffer(string: response)), promise: nil)
        // During a read, the HTTP parser may still be handing on parts of a request pipelined in the
        // same bytes; they must reach this handler (which drops them), not the WebSocket side.
        if reading {
            upgradePending = true
        } else {
            switchToWebSocket(context: context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        reading = false
        if upgradePending {
            upgradePending = false
            switchToWebSocket(context: context)
        }
        context.fireChannelReadComplete()
    }

    private func switchToWebSocket(context: ChannelHandlerContext) {
        do {
            try connection.upgraded(registry: registry, context: context)
        } catch {
            registry.logger.debug("could not set up the WebSocket of an upgraded connection: \(error)")
            context.close(promise: nil)
        }
    }

    /// Answers with `rejection` (a HEAD request gets no body) and closes the connection once the
    /// answer is written, or after the close-handshake timeout if the client does not read it.
    private func refuse(_ rejection: RelayRejection, context: ChannelHandlerContext) {
        // A client that left while its request was decided (a contact waiting for its phone) is
        // not refused: there is nobody to answer, and nothing to count.
        guard !answered, context.channel.isActive else { return }
        if case .rejected = connection.state {} else { connection.state = .rejected(rejection) }
        registry.recordRejected(
            rejection, request: connection.requestHead.map { "\($0.method.rawValue) \(TunnelServicePath.redactedTarget($0.uri))" })
        var response = rejection.response
        if connection.requestHead?.method == .HEAD {
            // A response to HEAD has no body (its Content-Length still says how long it would be).
            response = String(response[..<response.range(of: "\r\n\r\n")!.upperBound])
        }
        answer(response, context: context)
    }

    private func answer(_ response: String, context: ChannelHandlerContext) {
        guard !answered else { return }
        answered = true
        let channel = context.channel
        // A client that does not read could keep the write (and the connection) pending forever.
        let timer = context.eventLoop.assumeIsolated().scheduleTask(
            in: TimeAmount(registry.configuration.closeHandshakeTimeout)
        ) {
            channel.close(promise: nil)
        }
        channel.closeFuture.whenComplete { _ in timer.cancel() }
        context.writeAndFlush(NIOAny(channel.allocator.buffer(string: response))).whenComplete { _ in
            channel.close(promise: nil)
        }
    }

    /// Errors of the HTTP decoder. When what the decoder holds outgrew its bound (a request head
    /// or, while the upgrade is decided, the bytes behind the request; ``FirstRequestDecoder``), the
    /// connection is closed: what it sent can no longer be handled whole, and NIO's decoder drops
    /// every later read. A request the parser cannot read is answered `400` and closed. After the
    /// first request's end an error concerns a request the relay drops anyway and is dropped too,
    /// so a refusal being written is not cut short by a second answer.
    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if error is ByteToMessageDecoderError.PayloadTooLargeError {
            context.close(promise: nil)
        } else if let decoderError = error as? ByteToMessageDecoderError,
            case .dataReceivedInErrorState = decoderError
        {
            context.close(promise: nil)
        } else if connection.requestComplete {
            return
        } else if !context.channel.isActive {
            // The parser saw the end of a request cut short: the relay dropped the connection (its
            // upgrade timeout) or the client went away. No 400 can be sent, so none is counted.
            registry.logger.debug("connection closed before its request was complete: \(error)")
        } else if let parserError = error as? HTTPParserError {
            // NIO's decoder may report one bad request twice (its own error, then the parse's).
            guard !answered else { return }
            refuse(Self.malformedRejection(parserError, scan: decoder.headScan), context: context)
        } else {
            registry.logger.debug("connection error before its request: \(error)")
            context.close(promise: nil)
        }
    }
}
