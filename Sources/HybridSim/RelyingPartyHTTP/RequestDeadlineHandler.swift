import NIOCore
import NIOHTTP1

/// Closes a connection whose request is not complete within `deadline` of the connection's start:
/// a client that sends its request slowly, or not at all, does not hold the connection. One whose
/// head arrived (a body that never finishes) is answered `408 Request Timeout` first (RFC 9110
/// §15.5.9); one that sent no whole head is closed without a word (the relay answers 408 to a
/// partial head too; these servers cannot see one behind NIO's parser). It sits after NIO's HTTP
/// server pipeline and stops its timer at the request's end, or once a response has begun (an
/// answer decided from the head, while the body is still coming), so a response is never cut or
/// followed by a second one, and one that lasts (`desktop --web`'s `/events` stream) is not cut.
/// Before it answers it tells the handlers behind it (``Expired``), so they log the 408 and write
/// nothing more. Used by `hybrid-sim rp` and `desktop --web`.
final class RequestDeadlineHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// Sent down the pipeline when the deadline passes with the request unfinished, just before the
    /// 408 (`sawHead`) or the silent close.
    struct Expired {
        /// The head had arrived: a 408 follows.
        let sawHead: Bool
        /// The deadline, as messages write it ("30 s").
        let deadline: String
    }

    private let deadline: TimeAmount
    private var timer: Scheduled<Void>?
    private var sawHead = false
    /// A response (other than a 100 Continue) has begun: the deadline no longer applies.
    private var responseStarted = false

    init(deadline: TimeAmount) {
        self.deadline = deadline
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let seconds = Duration.nanoseconds(deadline.nanoseconds).seconds
        timer = context.eventLoop.scheduleTask(in: deadline) {
            let (handler, context) = bound.value
            handler.timer = nil
            guard !handler.responseStarted, context.channel.isActive else { return }
            context.fireUserInboundEventTriggered(Expired(sawHead: handler.sawHead, deadline: seconds))
            guard handler.sawHead else { return context.close(promise: nil) }
            handler.responseStarted = true
            let body = "the request was not complete within \(seconds)\n"
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
            headers.add(name: "Content-Length", value: String(body.utf8.count))
            headers.add(name: "Cache-Control", value: "no-store")
            headers.add(name: "X-Frame-Options", value: "DENY")
            headers.add(name: "Content-Security-Policy", value: "frame-ancestors 'none'")
            headers.add(name: "Connection", value: "close")
            context.write(handler.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .requestTimeout, headers: headers))), promise: nil)
            context.write(handler.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: body)))), promise: nil)
            let channel = context.channel
            context.writeAndFlush(handler.wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimer()
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelTimer()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: sawHead = true
        case .body: break
        case .end: cancelTimer()
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .head(let head) = unwrapOutboundIn(data), head.status != .continue {
            responseStarted = true
            cancelTimer()
        }
        context.write(data, promise: promise)
    }

    private func cancelTimer() {
        timer?.cancel()
        timer = nil
    }
}
