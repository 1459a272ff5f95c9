import HybridRuntime
import NIOCore
import NIOHTTP1

/// The first handler of `hybrid-sim rp`'s and `desktop --web`'s pipelines, in front of NIO's HTTP
/// decoder: it sees the raw bytes, so these servers can answer what the decoder never turns into a
/// request part. A head that does not arrive whole within the request deadline is answered
/// `408 Request Timeout` (RFC 9110 §15.5.9; the relay does the same), and a head the parser refuses
/// gets a status for its fault instead of NIO's `400` for every parser error: `414 URI Too Long`
/// when the request line alone is over NIO's 80 KiB limit, `431 Request Header Fields Too Large`
/// (RFC 6585 §5) when the head is over it otherwise (NIO counts the target and the header fields
/// together) or has more than ``maximumHeaderFields`` header fields (NIO's parser has no such bound,
/// and 20,000 tiny fields cost a connection 0.7 MB), `400` for the rest. The answer is written here in raw
/// bytes, below the HTTP encoder, since no request was decoded for a response to answer.
///
/// A refusal sent before the whole request was read (these, and the handler's 413) is followed by
/// a linger (``linger()``): the connection's write side is shut, and what the client still sends is
/// read and dropped, for at most ``lingerTime`` and ``lingerBytes``, before it closes. Closing with
/// unread input makes the kernel reset the connection, and a client still sending its body then
/// gets `ECONNRESET` instead of the answer (2 in 10 did at 2 MB, none at 5 MB).
final class RequestHeadWatch: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    /// What the HTTP encoder writes; passed on as it is.
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    /// Some byte of a request arrived.
    private(set) var sawBytes = false
    /// The lines of the head seen so far.
    private(set) var scan = RequestHeadScan()
    /// NIO's limit on a head's URL and on its header fields.
    static let headLimit = 80 * 1024
    /// The most header fields a request may have (Apache's default `LimitRequestFields`); more are 431.
    static let maximumHeaderFields = 100
    /// The raw bytes a head may take beyond ``headLimit`` (which NIO applies to the target and the
    /// field values) before the watch refuses it: room for the method, version, line ends and names.
    static let headSlack = 8 * 1024
    /// A refusal of the watch's own was sent to the handlers behind (``Refused``), or the connection
    /// lingers: the rest of the input is not passed on.
    private var refused = false
    /// The most time a connection lingers after a refusal, reading and dropping what still comes.
    static let lingerTime: TimeAmount = .seconds(2)
    /// The most bytes read and dropped while lingering; past them the connection closes at once.
    static let lingerBytes = 8 << 20
    /// The most bytes a connection's request may take with its framing (`nil`: no bound); more are
    /// 413. NIO's parser skips chunk extensions (`1;name=value`) without counting them toward
    /// anything, so without this a client could stream gigabytes of them as one body.
    let maximumRequestBytes: Int?
    /// The bytes of the request passed on so far.
    private var requestBytes = 0
    /// The bytes dropped while lingering, and the timer that ends it; `nil` until ``linger()``.
    private var lingering: (dropped: Int, timer: Scheduled<Void>)?
    /// The client half-closed: nothing more will come to linger for.
    private var inputClosed = false
    /// A refusal was written here, or a final response from the handlers behind began (a `100
    /// Continue` is not one): nothing more is written here.
    private(set) var answered = false
    private var context: ChannelHandlerContext?

    /// A watch bounding the request, framing included, to `maximumRequestBytes` (`nil`: no bound).
    init(maximumRequestBytes: Int? = nil) {
        self.maximumRequestBytes = maximumRequestBytes
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) {
        lingering?.timer.cancel()
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if let lingering {
            let dropped = lingering.dropped + unwrapInboundIn(data).readableBytes
            self.lingering?.dropped = dropped
            if dropped > Self.lingerBytes { context.close(promise: nil) }
            return
        }
        guard !refused else { return }
        requestBytes += unwrapInboundIn(data).readableBytes
        // Once a response began, what still comes is the handlers' to ignore (or the linger's to drop).
        if let maximumRequestBytes, requestBytes > maximumRequestBytes, !answered {
            return refuse(
                context: context,
                Refused(
                    status: 413,
                    reason: "the request is over \(maximumRequestBytes / 1024) KiB with its framing (chunk sizes and extensions count)",
                    subject: "an oversized request"))
        }
        if !scan.headEnded {
            let bytes = unwrapInboundIn(data).readableBytesView
            if !bytes.isEmpty { sawBytes = true }
            scan.read(bytes)
            if scan.headerFields > Self.maximumHeaderFields {
                return refuse(
                    context: context,
                    Refused(
                        status: 431, reason: "the request head has more than \(Self.maximumHeaderFields) header fields",
                        subject: "a request head with too many header fields"))
            }
        }
        context.fireChannelRead(data)
        // NIO counts a head's target and field values toward its 80 KiB, but not whitespace before
        // a value (`X: ` and a megabyte of spaces passed unbounded): the raw bytes of a head not
        // ended past the limit and room for its names and line ends are refused here, once the
        // parser had these bytes (its own 414 or 431 comes first).
        if !scan.headEnded, !answered, !refused, scan.headBytes > Self.headLimit + Self.headSlack {
            refuse(
                context: context,
                scan.requestLineBytes > Self.headLimit
                    ? Refused(status: 414, reason: "the request line is over 80 KiB", subject: "a request line too long")
                    : Refused(status: 431, reason: "the request head is over 80 KiB", subject: "a request head too long"))
        }
    }

    /// A request the watch refuses itself, from the raw bytes, before the parser does: sent to the
    /// handlers behind as an error, which answer it as they answer a parser error
    /// (``answerParserError(_:in:body:headers:)``).
    struct Refused: Error {
        /// The status to answer.
        let status: Int
        /// Why, for the answer.
        let reason: String
        /// What was refused, for the log line (`a request head with too many header fields`).
        let subject: String
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // The HTTP handlers behind may hold reads back once a response is out; a lingering
        // connection reads on until its client stops or the linger ends.
        guard lingering == nil else { return context.read() }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The client finished sending: nothing more to drop.
        if case .inputClosed = event as? ChannelEvent {
            inputClosed = true
            if lingering != nil { return context.close(promise: nil) }
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Ends the connection after its answer was sent, when the request may not have been read
    /// whole: shuts the write side (the client sees the end of the answer), then reads and drops
    /// what the client still sends until it stops, ``lingerTime`` passes or ``lingerBytes`` came,
    /// and closes.
    func linger() {
        guard let context, lingering == nil else { return }
        guard context.channel.isActive, !inputClosed else { return context.close(promise: nil) }
        refused = true
        let channel = context.channel
        let timer = context.eventLoop.scheduleTask(in: Self.lingerTime) { channel.close(promise: nil) }
        lingering = (0, timer)
        context.close(mode: .output, promise: nil)
        context.read()
    }

    /// Stops passing input on and tells the handlers behind of `refusal`.
    private func refuse(context: ChannelHandlerContext, _ refusal: Refused) {
        refused = true
        context.fireErrorCaught(refusal)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // A final response is on its way (an event stream, a 413): never a second one. The encoder
        // writes a head in one buffer, so an interim one is known by its status's first digit.
        if !answered, !Self.isInterimHead(unwrapOutboundIn(data)) { answered = true }
        context.write(data, promise: promise)
    }

    /// Whether `data` starts an interim (1xx) response head: `HTTP/1.x 1`.
    private static func isInterimHead(_ data: IOData) -> Bool {
        guard case .byteBuffer(let buffer) = data, buffer.readableBytes > 9 else { return false }
        let bytes = buffer.readableBytesView
        return bytes.starts(with: "HTTP/1.".utf8) && bytes[bytes.startIndex + 9] == UInt8(ascii: "1")
    }

    /// The status and reason for a request the parser refused with `error`: a specific reason where
    /// the parser's own is vague (`unknown` for any `Transfer-Encoding` fault, `invalid HTTP version`
    /// for a request line ending in a bare LF, `paused` for HTTP/2's preface), from what ``scan`` saw.
    func refusal(for error: HTTPParserError) -> (status: Int, reason: String) {
        switch error {
        case .headerOverflow:
            return scan.requestLineBytes > Self.headLimit
                ? (414, "the request line is over 80 KiB")
                : (431, "the request head is over 80 KiB")
        case .paused:
            // llhttp stops at HTTP/2's connection preface (`PRI * HTTP/2.0`).
            return (400, "HTTP/2 is not spoken here: this server takes HTTP/1.1 (its requests carry no connection preface)")
        case .unknown, .unexpectedContentLength, .invalidContentLength, .invalidVersion, .lfExpected, .invalidChunkSize:
            if let reason = scan.reason(for: error) { return (400, reason) }
            if scan.headEnded, !scan.transferEncodings.isEmpty, error != .invalidContentLength {
                return (400, "the chunked body's framing is malformed: each chunk is a hex size line, the data and CRLF (RFC 9112 §7.1)")
            }
        case .invalidMethod:
            return (400, "not an HTTP/1.1 request, or a method this server does not know")
        default: break
        }
        return (400, "the HTTP parser cannot read the request (\(error))")
    }

    /// Answers `status` with `body` (`reason` as one line of text when `nil`) and `extra` header
    /// fields, and ends the connection once it is sent (``linger()``), unless a response was already
    /// written (then it just closes it).
    func answer(
        _ status: Int, _ reason: String, body: (type: String, bytes: [UInt8])? = nil, headers extra: [(String, String)] = []
    ) {
        guard let context else { return }
        guard !answered else { return context.close(promise: nil) }
        answered = true
        // Nothing more reaches the parser, which would only complain of it (data after its error).
        refused = true
        let phrase = HTTPResponseStatus(statusCode: status).reasonPhrase
        let body = body ?? ("text/plain; charset=utf-8", Array((reason + "\n").utf8))
        let fields = [("Content-Type", body.type), ("Content-Length", "\(body.bytes.count)")] + extra
            + [("Connection", "close")]
        let head = "HTTP/1.1 \(status) \(phrase)\r\n" + fields.map { "\($0): \($1)\r\n" }.joined() + "\r\n"
        var buffer = context.channel.allocator.buffer(capacity: head.utf8.count + body.bytes.count)
        buffer.writeString(head)
        buffer.writeBytes(body.bytes)
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.byteBuffer(buffer)))
            .whenComplete { _ in bound.value.linger() }
    }
}

extension RequestHeadWatch {
    /// The body of an answer for a refusal's reason (`nil`: the reason as one line of text).
    typealias Body = (String) -> (type: String, bytes: [UInt8])?

    /// Answers `error`, when it is the HTTP parser's or the watch's own (``Refused``) and the
    /// connection is still open, through the connection's watch (400, 413, 414 or 431); returns the
    /// line to log, `nil` when it answered nothing. For the last handler of `rp` and `desktop --web`,
    /// which sees the parser's errors.
    static func answerParserError(
        _ error: any Error, in context: ChannelHandlerContext, body: Body = { _ in nil }, headers: [(String, String)] = []
    ) -> String? {
        guard context.channel.isActive, let watch = context.pipeline.syncOperations.requestHeadWatch else { return nil }
        let refusal: Refused
        if let error = error as? HTTPParserError {
            let (status, reason) = watch.refusal(for: error)
            refusal = Refused(status: status, reason: reason, subject: "a request the HTTP parser cannot read")
        } else if let error = error as? Refused {
            refusal = error
        } else {
            return nil
        }
        watch.answer(refusal.status, refusal.reason, body: body(refusal.reason), headers: headers)
        return "\(refusal.subject): \(refusal.status) \(refusal.reason)"
    }

    /// Answers 408 with `reason` when part of a request head arrived but no whole head (the
    /// deadline passed); returns the line to log, `nil` when nothing arrived.
    static func answerIncompleteHead(
        _ reason: String, in context: ChannelHandlerContext, body: Body = { _ in nil }, headers: [(String, String)] = []
    ) -> String? {
        guard let watch = context.pipeline.syncOperations.requestHeadWatch, watch.sawBytes else { return nil }
        watch.answer(408, reason, body: body(reason), headers: headers)
        return "an incomplete request head: 408 \(reason)"
    }
}

extension ChannelPipeline.SynchronousOperations {
    /// The pipeline of `rp` and `desktop --web` up to their request handler: ``RequestHeadWatch``,
    /// NIO's HTTP server handlers (without its error handler: the request handler answers a parser
    /// error through the watch) and the ``RequestDeadlineHandler``.
    func configureLocalHTTPServer(requestDeadline: TimeAmount, maximumRequestBytes: Int? = nil) throws {
        try addHandler(RequestHeadWatch(maximumRequestBytes: maximumRequestBytes))
        try configureHTTPServerPipeline(withErrorHandling: false)
        try addHandler(RequestDeadlineHandler(deadline: requestDeadline))
    }

    /// The connection's ``RequestHeadWatch``.
    var requestHeadWatch: RequestHeadWatch? { try? handler(type: RequestHeadWatch.self) }
}
