import NIOCore
import NIOHTTP1

/// Closes a connection whose request is not complete within `deadline` of the connection's start:
/// a client that sends its request slowly, or not at all, does not hold the connection. One whose
/// head arrived (a body that never finishes) is answered `408 Request Timeout` first, as the relay
/// answers (RFC 9110 §15.5.9); one that sent no whole head is closed without a word. It sits after
/// NIO's HTTP server pipeline and stops its timer at the request's end, so a response that lasts
/// (`desktop --web`'s `/events` stream) is not cut. Used by `hybrid-sim rp` and `desktop --web`.
final class RequestDeadlineHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let deadline: TimeAmount
    private var timer: Scheduled<Void>?
    private var sawHead = false

    init(deadline: TimeAmount) {
        self.deadline = deadline
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let seconds = Duration.nanoseconds(deadline.nanoseconds).seconds
        timer = context.eventLoop.scheduleTask(in: deadline) {
            let (handler, context) = bound.value
            guard handler.sawHead else { return context.close(promise: nil) }
            let body = "the request was not complete within \(seconds)\n"
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
            headers.add(name: "Content-Length", value: String(body.utf8.count))
            headers.add(name: "Connection", value: "close")
            context.write(handler.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .requestTimeout, headers: headers))), promise: nil)
            context.write(handler.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: body)))), promise: nil)
            let channel = context.channel
            context.writeAndFlush(handler.wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: sawHead = true
        case .body: break
        case .end:
            timer?.cancel()
            timer = nil
        }
        context.fireChannelRead(data)
    }
}
