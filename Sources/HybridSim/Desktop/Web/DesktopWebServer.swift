import Foundation
import HybridRuntime
import HybridQR
import NIOCore
import NIOHTTP1
import NIOPosix

/// `hybrid-sim desktop --web`: a loopback HTTP server for the page that plays the website
/// (Docs/CLI.md, "desktop --web"). Everything is below the page's secret path `/s/TOKEN/`
/// (``WebPageToken``): `GET /s/TOKEN/` the page, `GET /s/TOKEN/events` the desktop's `--json` events
/// as server-sent events (the whole story so far, then live, ending after `result` or `error`),
/// `GET /s/TOKEN/qr.svg` the QR code. The page is static; everything it shows comes from the events.
///
/// A request without the token, or with another, gets 403 and nothing of the ceremony: another
/// user of the machine can reach 127.0.0.1 too, and the stream carries the `FIDO:/` URL.
///
/// Only requests addressed to the loopback address and port, and not sent by another site's page,
/// are answered (``LoopbackRequestPolicy``): the stream carries the `FIDO:/` URL, and a page of
/// another site whose name was rebound to 127.0.0.1 (DNS rebinding) sends its own name as `Host`
/// (421 Misdirected Request); one that calls 127.0.0.1 directly sends its `Origin` (403).
///
/// A connection has ``requestDeadline`` to send its whole request (the `/events` stream that follows
/// may last the ceremony), and at most ``maximumConnections`` are open at once; more get the relay's
/// fixed 503. A browser showing the page holds two or three.
package final class DesktopWebServer: Sendable {
    /// How long a connection may take from its start to a complete request before it is closed.
    package static let requestDeadline: TimeAmount = .seconds(30)
    /// The most connections open at once.
    package static let maximumConnections = 256

    private let channel: any Channel
    /// The secret every request's path must start with.
    package let token: WebPageToken

    private init(channel: any Channel, token: WebPageToken) {
        self.channel = channel
        self.token = token
    }

    /// The bound port.
    package var port: Int { channel.localAddress?.port ?? 0 }

    /// The page's address, `http://127.0.0.1:PORT/s/TOKEN/`: a secret for whoever started the program.
    package var url: String { "http://127.0.0.1:\(port)\(token.path)" }

    /// Binds 127.0.0.1:`port` (0: a free port) and serves `events` with the desktop's page (or
    /// another page reading the same `events` and `qr.svg` below its path, such as `demo --web`'s),
    /// to requests whose path starts with `token`'s (a fresh one by default). An `accept`
    /// that fails (no descriptors left) pauses accepting for a moment instead of spinning, and
    /// `acceptLog` gets a line when such an episode begins and one when it ends (`AcceptFailures`, in HybridRuntime).
    package static func start(
        events: DesktopWebEvents, port: Int, page: String = DesktopWebPage.html, token: WebPageToken = WebPageToken(),
        requestDeadline: TimeAmount = requestDeadline, maximumConnections: Int = maximumConnections,
        acceptLog: @escaping @Sendable (String) -> Void = { _ in }
    ) async throws(ProgramFailure) -> DesktopWebServer {
        let cap = ConnectionCap(limit: maximumConnections)
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
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard try cap.admit(channel) else { return }  // past the cap: the relay's fixed 503
                    try channel.pipeline.syncOperations.configureLocalHTTPServer(requestDeadline: requestDeadline)
                    try channel.pipeline.syncOperations.addHandler(WebRequestHandler(events: events, page: page, token: token))
                }
            }
        do {
            return DesktopWebServer(channel: try await bootstrap.bind(host: "127.0.0.1", port: port).get(), token: token)
        } catch {
            let advice = BindConflict.portAdvice(errno: (error as? IOError)?.errnoCode, port: port, flag: "--web-port")
            throw ProgramFailure(
                .network, "cannot serve the web page on 127.0.0.1:\(port): \(BindConflict.reason(error, host: "127.0.0.1", port: port))\(advice)")
        }
    }

    /// Stops listening.
    package func stop() async {
        try? await channel.close().get()
    }

    /// The pages' policy: their inline script and style, images and the event stream from this
    /// server, nothing else (no plug-ins, forms, base URL or framing).
    package static let contentSecurityPolicy = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        + "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

private final class WebRequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let events: DesktopWebEvents
    private let page: [UInt8]
    private let token: WebPageToken
    private var head: HTTPRequestHead?
    /// The path `head` asked for below the token (`/`, `/events`, …).
    private var resource = ""
    /// Answered from the head (another method): the rest of the request is ignored.
    private var answered = false

    init(events: DesktopWebEvents, page: String, token: WebPageToken) {
        self.events = events
        self.page = Array(page.utf8)
        self.token = token
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The request deadline passed: 408 after a head, and after part of one (through the
        // raw-byte watch: no request was decoded), each reported; a connection that sent nothing
        // is closed by the deadline handler.
        if let expired = event as? RequestDeadlineHandler.Expired {
            let reason = "the request was not complete within \(expired.deadline)"
            if expired.sawHead, !answered, let head {
                events.refused("\(head.method.rawValue) \(head.uri): 408 \(reason)")
                respond(context, 408, "text/plain; charset=utf-8", Array((reason + "\n").utf8))
            } else if !expired.sawHead, !answered,
                let line = RequestHeadWatch.answerIncompleteHead(reason, in: context, headers: Self.pageHeaders)
            {
                events.refused(line)
            }
            answered = true
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A request the parser cannot read: 400, or 414/431 for an over-long head, through the
        // raw-byte watch, which closes after it; the connection is done either way.
        if !answered, let line = RequestHeadWatch.answerParserError(error, in: context, headers: Self.pageHeaders) {
            events.refused(line)
            answered = true
            return  // the watch closes once its answer is out
        }
        answered = true
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            // Decided from the head: the loopback policy (reported: another site's page, a
            // rebound name), then the page's token (reported: another local program, or a user
            // who typed the address without it), then the method. Only GET is served; another
            // method is answered without waiting for a body (or for a 100 Continue that `Expect`
            // asks for, RFC 9110 §10.1.1).
            if let (status, reason) = LoopbackRequestPolicy.refusal(head, port: context.channel.localAddress?.port ?? 0) {
                answered = true
                events.refused("\(head.method.rawValue) \(head.uri): \(status) \(reason)")
                return respond(context, status, "text/plain; charset=utf-8", Array((reason + "\n").utf8))
            }
            let target = LoopbackRequestPolicy.originForm(head.uri).target
            switch token.access(String(target.prefix { $0 != "?" })) {
            case .refused(let reason):
                answered = true
                events.refused("\(head.method.rawValue) \(head.uri): 403 \(reason)")
                return respond(context, 403, "text/plain; charset=utf-8", Array((reason + "\n").utf8), head: head.method == .HEAD)
            case .resource(let path): resource = String(path)
            }
            guard head.method == .GET || head.method == .HEAD else {
                answered = true
                return respond(context, 405, "text/plain", Array("only GET\n".utf8))
            }
            self.head = head
        case .body: break
        case .end:
            guard !answered, let head else { return }
            self.head = nil
            switch resource {
            case "":
                // `/s/TOKEN` alone: the page's relative links need the final `/`.
                let body = Array("the page is at \(token.path)\n".utf8)
                respond(context, 308, "text/plain", body, head: head.method == .HEAD, location: token.path)
            case "/": respond(context, 200, "text/html; charset=utf-8", page, head: head.method == .HEAD)
            case "/qr.svg":
                guard let url = events.qrURL, let matrix = try? QREncoder.encode(fidoURL: url) else {
                    return respond(context, 404, "text/plain", Array("no QR code yet\n".utf8), head: head.method == .HEAD)
                }
                respond(context, 200, "image/svg+xml", Array(SVGRenderer.render(matrix).utf8), head: head.method == .HEAD)
            case "/events" where head.method == .HEAD:
                // The stream's head alone (RFC 9110 §9.3.2: HEAD wherever GET works).
                context.write(wrapOutboundOut(.head(Self.streamHead(version: head.version))), promise: nil)
                let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
                context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in bound.value.close(promise: nil) }
            case "/events": stream(context, version: head.version)
            default: respond(context, 404, "text/plain", Array("not found\n".utf8), head: head.method == .HEAD)
            }
        }
    }

    /// On every answer but the event stream: not cached; another site's page may not frame this
    /// one (clickjacking a ceremony's page); the page loads nothing but its own inline script and
    /// style, its QR code and its event stream (text from the events is only ever set as text, and
    /// the policy bounds what an injection could do anyway); types are not sniffed; no request the
    /// page makes names it in `Referer` (its address holds the token).
    private static let pageHeaders = [
        ("Cache-Control", "no-store"), ("X-Frame-Options", "DENY"),
        ("Content-Security-Policy", DesktopWebServer.contentSecurityPolicy), ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
    ]

    /// Answers and closes; `head`: a HEAD request's answer, the same head without the body.
    private func respond(
        _ context: ChannelHandlerContext, _ status: Int, _ type: String, _ body: [UInt8], head: Bool = false, location: String? = nil
    ) {
        var headers = HTTPHeaders()
        if let location { headers.add(name: "Location", value: location) }
        headers.add(name: "Content-Type", value: type)
        headers.add(name: "Content-Length", value: String(body.count))
        headers.add(contentsOf: Self.pageHeaders)
        headers.add(name: "Connection", value: "close")
        if status == 405 { headers.add(name: "Allow", value: "GET, HEAD") }  // RFC 9110 §15.5.6
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: status), headers: headers))), promise: nil)
        if !head { context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil) }
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in bound.value.close(promise: nil) }
    }

    /// The event stream's head (a GET's and a HEAD's): HTTP/1.0 to an HTTP/1.0 client.
    private static func streamHead(version: HTTPVersion) -> HTTPResponseHead {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/event-stream")
        headers.add(name: "Cache-Control", value: "no-store")
        headers.add(name: "Connection", value: "close")
        return HTTPResponseHead(version: version == .http1_0 ? .http1_0 : .http1_1, status: .ok, headers: headers)
    }

    /// Server-sent events: each `--json` line as one `data:` event; a comment every 15 s keeps idle
    /// connections open; the response ends after the last event.
    /// An HTTP/1.0 client gets an HTTP/1.0 response whose body ends when the connection does: it
    /// cannot read chunked transfer coding (RFC 9112 §6.1).
    private func stream(_ context: ChannelHandlerContext, version: HTTPVersion) {
        events.streamOpened()
        context.writeAndFlush(wrapOutboundOut(.head(Self.streamHead(version: version))), promise: nil)
        let channel = context.channel
        let events = self.events
        let streaming = Task {
            var sent = 0
            while channel.isActive {
                let (lines, finished) = events.lines(from: sent)
                sent += lines.count
                let text = lines.isEmpty ? ": waiting\n\n" : lines.map { "data: \($0)\n\n" }.joined()
                let part = HTTPServerResponsePart.body(.byteBuffer(channel.allocator.buffer(string: text)))
                try? await channel.writeAndFlush(part)
                if finished {
                    try? await channel.writeAndFlush(HTTPServerResponsePart.end(nil))
                    try? await channel.close()
                    return
                }
                await events.waitForMore(than: sent, timeout: .seconds(15))
            }
        }
        // A client that leaves ends its stream now, not at the next 15 s wait (a flood of
        // connect-and-leave requests held every stream's memory until then).
        channel.closeFuture.whenComplete { _ in streaming.cancel() }
    }
}
