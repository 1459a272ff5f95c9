import Foundation
import HybridRuntime
import NIOCore
import NIOHTTP1
import NIOPosix

/// `hybrid-sim rp`'s HTTP/1.1 listener (SwiftNIO): hands each complete request to a
/// ``RelyingPartyService`` and writes its JSON answer, one request per connection
/// (`Connection: close`). Bodies over 1 MiB (16 KiB to an options endpoint,
/// ``RelyingPartyService/maximumOptionsBodyBytes``) are answered with 413, a transfer coding other than
/// chunked with 501, a request whose head or body does not arrive within the deadline with 408, a
/// head over NIO's 80 KiB limit with 414 (the request line) or 431 (the header fields).
public final class RelyingPartyHTTPServer: Sendable {
    /// The largest request body accepted (by a result endpoint; an options endpoint takes
    /// ``RelyingPartyService/maximumOptionsBodyBytes``).
    public static let maximumBodyBytes = 1 << 20
    /// The most request-body bytes held at once across all connections; a body that
    /// would take more is answered 503 with `Retry-After: 1`.
    public static let maximumBodyBytesInFlight = 64 << 20
    /// The most bytes a request may take on the wire, its head and a chunked body's framing included:
    /// the head limit and twice the largest body (so chunks of a few bytes each still fit); more are
    /// 413 (NIO's parser skips chunk extensions without counting them toward the body).
    public static let maximumRequestBytes = RequestHeadWatch.headLimit + 2 * maximumBodyBytes
    /// The most connections open at once; more get the relay's fixed 503 and are closed.
    public static let maximumConnections = 1024
    /// How long a connection may take from its start to a complete request before it is closed
    /// (answered `408` first when any of its head arrived).
    public static let requestDeadline: TimeAmount = .seconds(30)

    private let service: RelyingPartyService
    private let channel: any Channel

    private init(service: RelyingPartyService, channel: any Channel) {
        self.service = service
        self.channel = channel
    }

    /// The bound port.
    public var port: Int { channel.localAddress?.port ?? 0 }

    /// Binds `host:port` (0: a free port) and starts serving; a connection without a complete
    /// request after `requestDeadline` is closed (with a `408` when any of its head arrived), and one past
    /// `maximumConnections` open gets 503, and so does a body that would take the bodies held at
    /// once past `maximumBodyBytesInFlight`. An `accept` that fails (no descriptors left) pauses
    /// accepting for a moment instead of spinning, and `acceptLog` gets a line when such an episode
    /// begins and one when it ends (`AcceptFailures`, in HybridRuntime).
    ///
    /// - Throws: ``ProgramFailure`` `network` when the port cannot be bound.
    public static func start(
        service: RelyingPartyService, host: String = "127.0.0.1", port: Int, requestDeadline: TimeAmount = requestDeadline,
        maximumConnections: Int = maximumConnections, maximumBodyBytesInFlight: Int = maximumBodyBytesInFlight,
        acceptLog: @escaping @Sendable (String) -> Void = { _ in }
    ) async throws(ProgramFailure) -> RelyingPartyHTTPServer {
        let cap = ConnectionCap(limit: maximumConnections)
        let budget = ByteBudget(limit: maximumBodyBytesInFlight)
        let failures = AcceptFailures { line in
            switch line {
            case .paused(let text), .resumed(let text): acceptLog(text)
            }
        }
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try AcceptFailureHandler.install(on: channel, failures: failures) }
            }
            // A client that half-closes after its request (`nc -N`, `socat`) still gets the answer.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard try cap.admit(channel) else { return }  // past the cap: the relay's fixed 503
                    try channel.pipeline.syncOperations.configureLocalHTTPServer(
                        requestDeadline: requestDeadline, maximumRequestBytes: maximumRequestBytes)
                    try channel.pipeline.syncOperations.addHandler(RequestHandler(service: service, budget: budget))
                }
            }
        do {
            let channel = try await bootstrap.bind(host: host, port: port).get()
            return RelyingPartyHTTPServer(service: service, channel: channel)
        } catch {
            let advice = BindConflict.portAdvice(errno: (error as? IOError)?.errnoCode, port: port, flag: "--port")
            throw ProgramFailure(.network, "cannot listen on \(host):\(port): \(BindConflict.reason(error, host: host, port: port))\(advice)")
        }
    }

    /// Stops listening.
    public func stop() async {
        try? await channel.close().get()
    }

    /// Completes when the listener closes.
    public func waitUntilClosed() async {
        try? await channel.closeFuture.get()
    }
}

/// Collects one request and answers it. One request per connection (`Connection: close`), within
/// ``RelyingPartyHTTPServer/requestDeadline`` of the connection's start; a body over the limit is
/// refused as soon as it is known to be, and a request the parser cannot read ends the connection
/// after a 400, 414 or 431 (``RequestHeadWatch``).
final class RequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let service: RelyingPartyService
    private let budget: ByteBudget
    /// Answers a request on the loop itself instead of in a task (`RelyingPartyRequestProbe`, whose
    /// `EmbeddedChannel` must not be touched from another thread); `nil` in the server.
    private let respondInline: (@Sendable (RelyingPartyHTTPRequest) -> RelyingPartyHTTPResponse)?
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    /// The bytes of ``budget`` this connection holds for its body (announced or received).
    private var reserved = 0
    /// The largest body the request's endpoint takes (``RelyingPartyService/bodyLimit(for:)``).
    private var bodyLimit = RelyingPartyHTTPServer.maximumBodyBytes
    private var answered = false
    /// The request went to the service; its answer is on the way.
    private var dispatched = false
    /// The request's end arrived: nothing of it is left unread when it is answered.
    private var requestEnded = false

    init(
        service: RelyingPartyService, budget: ByteBudget,
        respondInline: (@Sendable (RelyingPartyHTTPRequest) -> RelyingPartyHTTPResponse)? = nil
    ) {
        self.service = service
        self.budget = budget
        self.respondInline = respondInline
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        releaseBody()
    }

    /// Drops the body and gives its bytes back to the budget.
    private func releaseBody() {
        body = []
        budget.release(reserved)
        reserved = 0
    }

    /// Reserves budget for a body of `size` bytes in all; `false` (after a 503) when the budget has
    /// no room.
    private func reserveBody(_ size: Int, context: ChannelHandlerContext, _ head: HTTPRequestHead?) -> Bool {
        guard size > reserved else { return true }
        if budget.reserve(size - reserved) {
            reserved = size
            return true
        }
        self.head = nil
        releaseBody()
        let limit = budget.limit % (1 << 20) == 0 ? "\(budget.limit >> 20) MiB" : "\(budget.limit >> 10) KiB"
        var response = RelyingPartyHTTPResponse.error(
            503, "the request bodies held at once would pass \(limit), the most this server holds: try again shortly")
        response.headers.append(("Retry-After", "1"))
        let request = head.map { "\($0.method.rawValue) \(Self.request($0, body: []).path)" } ?? "a request"
        service.noteRefusal("\(request): 503 the request bodies held at once would pass \(limit)")
        write(context: context, response)
        return false
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A parser error is answered (400, or 414/431 for an over-long head) through the raw-byte
        // watch, which closes after it; anything else (a reset connection) gets nothing. A parser
        // error after the connection closed is the close itself (the deadline's), not a request
        // it could not read.
        if !answered, !dispatched,
            let line = RequestHeadWatch.answerParserError(error, in: context, body: Self.jsonError, headers: Self.answerHeaders)
        {
            service.noteRefusal(line)
            answered = true
            return
        }
        // Once answered, the parser's complaints about what still came (data after its error) are
        // no reason to cut the answer short: its write ends the connection (lingering).
        if answered, error is HTTPParserError || error is ByteToMessageDecoderError || error is RequestHeadWatch.Refused { return }
        answered = true
        context.close(promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The request deadline passed: 408 after a head, and after part of one (through the
        // raw-byte watch: no request was decoded); a connection that sent nothing is closed.
        if let expired = event as? RequestDeadlineHandler.Expired {
            if !answered, !dispatched {
                let reason = "the request was not complete within \(expired.deadline)"
                if expired.sawHead { return refuse(context: context, head, 408, reason) }
                if let line = RequestHeadWatch.answerIncompleteHead(reason, in: context, body: Self.jsonError, headers: Self.answerHeaders) {
                    service.noteRefusal(line)
                }
            }
            answered = true
            return
        }
        // The client half-closed: a complete request is still answered (the answer then closes the
        // connection); one cut short is closed here, unless the parser's complaint about its end
        // (a body shorter than announced) was answered 400 first (``RequestHeadWatch``).
        if case .inputClosed = event as? ChannelEvent, !dispatched, !answered {
            answered = true
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !answered, !dispatched else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            // No Host, another Host, or another site's page (DNS rebinding, cross-site requests).
            if let (status, reason) = LoopbackRequestPolicy.refusal(head, port: context.channel.localAddress?.port ?? 0) {
                return refuse(context: context, head, status, reason)
            }
            // RFC 9112 §6.1: a transfer coding the server does not understand (anything but
            // chunked: the body would be read as if it were not coded) is 501.
            var unknown: Substring?
            head.headers.forEachToken(named: "transfer-encoding") { coding in
                if coding.lowercased() != "chunked" { unknown = coding }
                return unknown == nil
            }
            if let unknown {
                return refuse(context: context, head, 501, "transfer coding \(unknown) is not implemented; only chunked is (RFC 9112 §6.1)")
            }
            bodyLimit = service.bodyLimit(for: Self.request(head, body: []))
            let length = head.headers.first(name: "Content-Length").flatMap(Int.init)
            if let length, length > bodyLimit {
                return refuseTooLarge(context: context, head)
            }
            if let length {
                guard reserveBody(length, context: context, head) else { return }
            }
            self.head = head
            body = []
            if let length { body.reserveCapacity(length) }
            // RFC 9110 §10.1.1: a client that asks before sending its body (curl does for bodies
            // over 1 MiB; other clients for any) is told to go on when the body decides the answer,
            // and gets its final answer at once when the head already does (an unknown path, another
            // method), instead of waiting a second or more for a 100 that never comes.
            if head.version == .http1_1, Self.expectsContinue(head.headers) {
                if service.routes(Self.request(head, body: [])) {
                    context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .continue))), promise: nil)
                } else {
                    self.head = nil
                    dispatch(Self.request(head, body: []), context: context)
                }
            }
        case .body(let buffer):
            guard body.count + buffer.readableBytes <= bodyLimit else {
                return refuseTooLarge(context: context, head)
            }
            guard reserveBody(body.count + buffer.readableBytes, context: context, head) else { return }
            body += buffer.readableBytesView
        case .end:
            requestEnded = true
            guard let head else { return }
            self.head = nil
            dispatch(Self.request(head, body: body), context: context)
        }
    }

    /// Whether an `Expect` field lists `100-continue` (a field may list several, comma-separated).
    private static func expectsContinue(_ headers: HTTPHeaders) -> Bool {
        headers["Expect"].contains { field in
            field.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces).lowercased() == "100-continue" }
        }
    }

    private static func request(_ head: HTTPRequestHead, body: [UInt8]) -> RelyingPartyHTTPRequest {
        var headers: [String: String] = [:]
        for (name, value) in head.headers { headers[name.lowercased()] = value }
        return RelyingPartyHTTPRequest(method: head.method.rawValue, target: head.uri, headers: headers, body: body)
    }

    /// Hands the request to the service; its answer is written on the loop. Whatever the client
    /// still sends is ignored (one request per connection).
    private func dispatch(_ request: RelyingPartyHTTPRequest, context: ChannelHandlerContext) {
        dispatched = true
        if let respondInline { return write(context: context, respondInline(request)) }
        let service = self.service
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        Task {
            let response = await service.handle(request)
            bound.eventLoop.execute {
                let (handler, context) = bound.value
                handler.write(context: context, response)
            }
        }
    }

    /// 413 at once, without reading the rest of the body (what still comes is dropped for a while,
    /// ``RequestHeadWatch/linger()``), and the connection ends.
    private func refuseTooLarge(context: ChannelHandlerContext, _ head: HTTPRequestHead?) {
        self.head = nil
        releaseBody()
        let reason = bodyLimit == RelyingPartyHTTPServer.maximumBodyBytes
            ? "the body is larger than 1 MiB"
            : "the body is larger than \(bodyLimit / 1024) KiB, the most an options endpoint takes"
        refuse(context: context, head, 413, reason)
    }

    /// The body of ``RelyingPartyHTTPResponse/error(_:_:)`` for an answer the head watch writes.
    private static func jsonError(_ reason: String) -> (type: String, bytes: [UInt8]) {
        ("application/json", Array(RelyingPartyHTTPResponse.error(0, reason).body.data))
    }

    /// Answers a request refused before the service saw it, and logs it as the service logs its own.
    private func refuse(context: ChannelHandlerContext, _ head: HTTPRequestHead?, _ status: Int, _ reason: String) {
        let request = head.map { "\($0.method.rawValue) \(Self.request($0, body: []).path)" } ?? "a request"
        service.noteRefusal("\(request): \(status) \(reason)")
        write(context: context, RelyingPartyHTTPResponse.error(status, reason))
    }

    /// On every answer, refusals of unreadable requests included: each is one ceremony's (a
    /// challenge, a verdict) or about one, so never cached or reused, and JSON read as JSON only.
    private static let answerHeaders = [("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff")]

    private func write(context: ChannelHandlerContext, _ response: RelyingPartyHTTPResponse) {
        guard !answered else { return }
        answered = true
        releaseBody()
        let bytes = response.body.data
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: String(bytes.count))
        headers.add(name: "Connection", value: "close")
        headers.add(contentsOf: Self.answerHeaders)
        for (name, value) in response.headers { headers.add(name: name, value: value) }
        let status = HTTPResponseStatus(statusCode: response.status)
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: bytes)))), promise: nil)
        // An answer before the request's end (a refusal) lingers, so a client still sending its body
        // gets the answer rather than a reset (``RequestHeadWatch/linger()``).
        let bound = NIOLoopBound((context, requestEnded), eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            let (context, ended) = bound.value
            guard !ended, let watch = context.pipeline.syncOperations.requestHeadWatch else { return context.close(promise: nil) }
            watch.linger()
        }
    }
}
