import NIOCore

/// Answers a connection beyond `--max-connections` (``RelayConfiguration/maxConnections``) with a
/// fixed HTTP 503, without parsing the request: no HTTP decoder, no upgrade handler, no tunnel
/// lookup. The response is written as soon as the connection is active, then the write side is
/// shut down (FIN) and what the client still sends is discarded until it closes; a timer drops the
/// connection after the close timeout whatever the client does.
final class OverCapacityHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    /// The whole response.
    static let response: String = {
        let body = "too many connections; try again later\n"
        return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
            + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body
    }()

    private let closeTimeout: Duration
    private var answered = false
    private var timer: Scheduled<Void>?

    init(closeTimeout: Duration) {
        self.closeTimeout = closeTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { answer(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        answer(context: context)
        context.fireChannelActive()
    }

    private func answer(context: ChannelHandlerContext) {
        guard !answered else { return }
        answered = true
        let channel = context.channel
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(closeTimeout)) {
            channel.close(promise: nil)
        }
        let buffer = channel.allocator.buffer(string: Self.response)
        context.writeAndFlush(NIOAny(buffer)).whenComplete { result in
            switch result {
            case .success: channel.close(mode: .output, promise: nil)
            case .failure: channel.close(promise: nil)
            }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // The request is not looked at.
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }
}
