import CTAP2
import Crypto
import Foundation
import HybridCore
import NIOCore
import NIOHTTP1

/// The client half of a ``WebSocketTunnel``'s HTTP upgrade (RFC 6455 §4.1), written out by hand in
/// one handler instead of NIO's HTTP request encoder, response decoder and typed client upgrade
/// handler (which cost about 5 % of a `hybrid-sim bench` sign-in's CPU, for one request and one
/// response per connection).
///
/// It writes the upgrade request once the connection is up, collects the response head (at most
/// ``maxHeadSize`` bytes) and then:
/// - **101**: the `Upgrade` header must name `websocket` and `Sec-WebSocket-Accept` must be the
///   one value derived from our key (else the upgrade fails with a ``RuntimeError``
///   `.handshakeFailed` naming the check); `install` sets up the WebSocket handlers behind this one,
///   which removes itself and passes on the bytes that came after the head (frames the relay sent
///   right behind its 101);
/// - **any other status**: the outcome is `.rejected`, with the status and the first line of up to
///   1 KiB of the body (`Content-Length`, chunked, or up to the end of the connection).
///
/// The same checks NIO's upgrade handlers made; the `fido.cable` subprotocol and the routing ID are
/// checked by ``WebSocketTunnel`` on the head this hands over.
final class ClientUpgradeHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// The largest response head accepted, bytes (NIO's HTTP decoder allows 80 KiB; a relay's 101
    /// is a few hundred bytes).
    static let maxHeadSize = 16 * 1024
    /// The largest part of a refusal's body kept.
    static let maxBody = 1024
    /// The most interim (1xx) responses taken before the answer.
    static let maxInterimResponses = 16

    private enum State {
        /// Collecting the response head.
        case awaitingHead
        /// A refusal's head arrived; collecting (part of) its body.
        case readingBody(HTTPResponseStatus, RefusalBody)
        /// Upgraded, refused or failed: nothing more to do.
        case done
    }

    private let request: ByteBuffer
    private let expectedAccept: String
    private let install: (Channel, HTTPResponseHead) throws -> ClientUpgradeOutcome
    private let promise: EventLoopPromise<ClientUpgradeOutcome>
    private var received: ByteBuffer?
    private var state = State.awaitingHead
    private var requestSent = false
    private var interimResponses = 0
    /// Why the request cannot be sent (a CR, LF or NUL in the path or a header), if so.
    private let requestError: String?

    /// A handler that asks for `path` with `headers` (the caller's: `Host`, `Origin`, …); `install`
    /// runs on a 101 that passed the checks and sets up the WebSocket pipeline.
    init(
        path: String, headers: [(String, String)], key: String = ClientUpgradeHandler.randomKey(),
        promise: EventLoopPromise<ClientUpgradeOutcome>,
        install: @escaping (Channel, HTTPResponseHead) throws -> ClientUpgradeOutcome
    ) {
        func forbidden(_ field: String) -> Bool {
            field.utf8.contains { $0 == 0 || $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\n") }
        }
        requestError = forbidden(path) || headers.contains(where: { forbidden($0.0) || forbidden($0.1) })
            ? "the WebSocket request's path or a header contains CR, LF or NUL" : nil
        var text = "GET \(path) HTTP/1.1\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        // What NIO's upgrade handlers added, in their order.
        text += "Connection: upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n\r\n"
        self.request = ByteBuffer(string: text)
        self.expectedAccept = WebSocketAccept.value(forKey: key)
        self.promise = promise
        self.install = install
    }

    /// The outcome: `.upgraded` or `.rejected`; fails when the connection ends or breaks first.
    var outcome: EventLoopFuture<ClientUpgradeOutcome> { promise.futureResult }

    /// 16 random bytes in base64: a `Sec-WebSocket-Key` (RFC 6455 §4.1).
    static func randomKey() -> String {
        Data(RandomSource.system.bytes(16)).base64EncodedString()
    }

    // MARK: - Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { sendRequest(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        sendRequest(context: context)
        context.fireChannelActive()
    }

    private func sendRequest(context: ChannelHandlerContext) {
        guard !requestSent else { return }
        requestSent = true
        if let requestError { return fail(context, requestError) }
        context.writeAndFlush(wrapOutboundOut(request), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        switch state {
        case .done:
            return
        case .readingBody(let status, var body):
            if body.take(&bytes) { finishRefusal(status, body) } else { state = .readingBody(status, body) }
        case .awaitingHead:
            if received == nil {
                received = bytes
            } else {
                received!.writeBuffer(&bytes)
            }
            readHead(context: context)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        end()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        end(error)
        context.close(promise: nil)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        end()
    }

    /// The connection ended (or failed with `error`): a refusal ends with what arrived of its body,
    /// an upgrade still waiting for its head fails.
    private func end(_ error: (any Error)? = nil) {
        switch state {
        case .done:
            return
        case .readingBody(let status, let body):
            finishRefusal(status, body)
        case .awaitingHead:
            state = .done
            promise.fail(error ?? ChannelError.eof)
        }
    }

    // MARK: - The response

    private func readHead(context: ChannelHandlerContext) {
        guard var buffer = received else { return }
        // Something that is not HTTP (an SSH banner, an HTTP/2 frame, binary) is refused as soon as
        // its first bytes show it, not when the connection ends or the upgrade timeout passes.
        guard ResponseHead.canStartStatusLine(buffer.readableBytesView) else {
            return fail(
                context,
                "the relay's answer is not HTTP/1.x: it begins \"\(PeerText.printable(bytes: buffer.readableBytesView, limit: 16))\" (is the relay URL a tunnel service?)")
        }
        guard let (headLength, bodyStart) = ResponseHead.end(buffer.readableBytesView.prefix(Self.maxHeadSize + 4)) else {
            if buffer.readableBytes > Self.maxHeadSize {
                fail(context, "the relay's response head is over \(Self.maxHeadSize) bytes")
            }
            return
        }
        let headBytes = buffer.readBytes(length: headLength)!
        buffer.moveReaderIndex(forwardBy: bodyStart - headLength)
        received = nil
        let head: HTTPResponseHead
        switch ResponseHead.read(headBytes) {
        case .success(let read): head = read
        case .failure(let problem): return fail(context, "the relay's answer is not HTTP/1.x: \(problem.reason)")
        }
        if head.status.code / 100 == 1, head.status != .switchingProtocols {
            // An interim response (100 Continue, 103 Early Hints): the real one follows (RFC 9110
            // §15.2). A few are taken; an endless run of them is a relay that never answers.
            interimResponses += 1
            guard interimResponses <= Self.maxInterimResponses else {
                return fail(context, "the relay sent more than \(Self.maxInterimResponses) interim (1xx) responses before its answer")
            }
            if buffer.readableBytes > 0 { received = buffer }
            return readHead(context: context)
        }
        guard head.status == .switchingProtocols else {
            var body = RefusalBody(headers: head.headers)
            if body.take(&buffer) { finishRefusal(head.status, body) } else { state = .readingBody(head.status, body) }
            return
        }
        guard head.headers["Upgrade"].first?.lowercased() == "websocket" else {
            let got = head.headers["Upgrade"].joined(separator: ", ")
            return fail(context, "the relay's 101 does not upgrade to websocket (Upgrade: \(got.isEmpty ? "none" : PeerText.printable(got)))")
        }
        let accept = head.headers["Sec-WebSocket-Accept"]
        guard !accept.isEmpty else { return fail(context, "the relay's 101 has no Sec-WebSocket-Accept header") }
        guard accept.count == 1 else {
            return fail(
                context,
                "the relay's 101 has \(accept.count) Sec-WebSocket-Accept headers (\(PeerText.printable(accept.joined(separator: ", ")))); RFC 6455 §4.1 wants exactly one")
        }
        guard accept[0] == expectedAccept else {
            return fail(context, "the relay's 101 has a wrong Sec-WebSocket-Accept (\(PeerText.printable(accept[0])))")
        }
        // No extension is offered, so none may be selected (RFC 6455 §4.1: the client fails the
        // connection); a relay that compressed frames would send ones this client cannot read.
        let extensions = head.headers["Sec-WebSocket-Extensions"]
        guard extensions.isEmpty else {
            return fail(
                context,
                "the relay's 101 selects the extension \(PeerText.printable(extensions.joined(separator: ", "))), which was not offered (RFC 6455 §4.1)")
        }
        do {
            let outcome = try install(context.channel, head)
            state = .done
            promise.succeed(outcome)
            if buffer.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(buffer)) }
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        } catch {
            state = .done
            promise.fail(error)
            context.close(promise: nil)
        }
    }

    private func fail(_ context: ChannelHandlerContext, _ reason: String) {
        state = .done
        promise.fail(RuntimeError(.handshakeFailed, reason))
        context.close(promise: nil)
    }

    private func finishRefusal(_ status: HTTPResponseStatus, _ body: RefusalBody) {
        state = .done
        // Whole (at most 1 KiB): a proxy's HTML page has its title past the first line.
        let text = String(decoding: body.bytes, as: UTF8.self)
        let response = promise.futureResult.eventLoop.makeSucceededFuture((status, text))
        promise.succeed(.rejected(response))
    }
}

/// What is kept of a refusal's body: up to ``ClientUpgradeHandler/maxBody`` bytes of it, read as its
/// `Content-Length` or chunked framing says, or up to the end of the connection.
struct RefusalBody {
    private enum Framing {
        case length(Int)
        case chunked
        case untilClose
    }

    /// The most of a refusal's raw body (with chunk framing) read.
    static let maxRaw = 16 * 1024

    private var framing: Framing
    private var raw: [UInt8] = []
    private(set) var bytes: [UInt8] = []

    init(headers: HTTPHeaders) {
        if headers["Transfer-Encoding"].contains(where: { $0.lowercased().contains("chunked") }) {
            framing = .chunked
        } else if let text = headers["Content-Length"].first {
            // Unsigned: "-1" is not a length (it would make the prefix below trap). A length that is
            // not a number leaves the body's end unknown (RFC 9112 §6.3): the refusal is taken
            // without its body instead of waiting for the connection to end.
            framing = .length(UInt(text).map { Int(clamping: $0) } ?? 0)
        } else {
            framing = .untilClose
        }
    }

    /// Takes `buffer`'s bytes; `true` once the body (or as much as is kept) is complete.
    mutating func take(_ buffer: inout ByteBuffer) -> Bool {
        // Everything that fits under the bound, so chunk framing stays aligned; at the bound the body
        // is as complete as it will be (a chunk line that never ends cannot hold the connection).
        raw += buffer.readBytes(length: min(buffer.readableBytes, Self.maxRaw - raw.count)) ?? []
        buffer.moveReaderIndex(to: buffer.writerIndex)
        let complete: Bool
        switch framing {
        case .length(let length):
            bytes = Array(raw.prefix(min(length, ClientUpgradeHandler.maxBody)))
            complete = raw.count >= min(length, ClientUpgradeHandler.maxBody)
        case .untilClose:
            bytes = Array(raw.prefix(ClientUpgradeHandler.maxBody))
            complete = raw.count >= ClientUpgradeHandler.maxBody
        case .chunked:
            let (decoded, finished) = Self.dechunk(raw)
            bytes = Array(decoded.prefix(ClientUpgradeHandler.maxBody))
            complete = finished || decoded.count >= ClientUpgradeHandler.maxBody
        }
        return complete || raw.count >= Self.maxRaw
    }

    /// The data of the complete chunks in `raw` and whether the last chunk (size 0) was among them.
    private static func dechunk(_ raw: [UInt8]) -> ([UInt8], Bool) {
        var data: [UInt8] = []
        var rest = raw[...]
        while let lineEnd = rest.firstIndex(of: UInt8(ascii: "\n")) {
            let sizeText = String(decoding: rest[..<lineEnd], as: UTF8.self)
                .split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
            // Unsigned: a "-1" size would make the range below trap.
            guard let unsigned = UInt(sizeText, radix: 16), let size = Int(exactly: unsigned) else { return (data, true) }
            if size == 0 { return (data, true) }
            let start = rest.index(after: lineEnd)
            guard rest.distance(from: start, to: rest.endIndex) >= size else {
                data += rest[start...]
                return (data, false)
            }
            data += rest[start..<(start + size)]
            rest = rest[(start + size)...].drop { $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\n") }
        }
        return (data, false)
    }
}
