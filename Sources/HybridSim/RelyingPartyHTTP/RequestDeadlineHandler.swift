import NIOCore
import NIOHTTP1

/// Ends a connection whose request is not complete within `deadline` of the connection's start: a
/// client that sends its request slowly, or not at all, does not hold the connection. It tells the
/// handler behind it (``Expired``), which answers one whose head arrived with `408 Request Timeout`
/// (RFC 9110 §15.5.9) in its own form and logs it, and one with part of a head through the
/// ``RequestHeadWatch`` (as the relay does); one that sent nothing, or that nobody answered, is
/// closed without a word. It sits after NIO's HTTP server pipeline and stops its timer
/// at the request's end, or once a response has begun (an answer decided from the head while the
/// body is still coming), so a response is never cut or followed by a second one, and one that
/// lasts (`desktop --web`'s `/events` stream) is not cut. Used by `hybrid-sim rp` and `desktop --web`.
final class RequestDeadlineHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// Sent down the pipeline when the deadline passes with the request unfinished and no response
    /// begun: the handler behind answers `408` when `sawHead` (its answer passes back through here).
    struct Expired {
        /// The head had arrived.
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
            // Answered behind (the 408 passed back through `write`, or the head watch wrote one
            // below the encoder), which closes after it; else close now.
            if !handler.responseStarted, context.pipeline.syncOperations.requestHeadWatch?.answered != true {
                context.close(promise: nil)
            }
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
