import NIOCore
import NIOHTTP1

/// Closes a connection whose request is not complete within `deadline` of the connection's start:
/// a client that sends its request slowly, or not at all, does not hold the connection. It sits
/// after NIO's HTTP server pipeline and stops its timer at the request's end, so a response that
/// lasts (`desktop --web`'s `/events` stream) is not cut. Used by `hybrid-sim rp` and `desktop --web`.
final class RequestDeadlineHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    private let deadline: TimeAmount
    private var timer: Scheduled<Void>?

    init(deadline: TimeAmount) {
        self.deadline = deadline
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: deadline) { channel.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .end = unwrapInboundIn(data) {
            timer?.cancel()
            timer = nil
        }
        context.fireChannelRead(data)
    }
}
