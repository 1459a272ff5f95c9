import NIOCore
import NIOWebSocket

/// The last handler of an upgraded `/cable/listen/…` connection: writes push messages to the phone
/// and reads its refusals. Pings are answered; a text frame or anything malformed closes the
/// channel with 1003 / 1008.
final class ListenerHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let directory: ContactDirectory
    private let contactID: [UInt8]
    private let closeHandshakeTimeout: Duration
    private var context: ChannelHandlerContext?
    private var open = true
    /// Pongs are rate-limited as on a tunnel connection: a ping flood must not grow memory.
    private var pongs = PongBudget()

    init(directory: ContactDirectory, contactID: [UInt8], closeHandshakeTimeout: Duration) {
        self.directory = directory
        self.contactID = contactID
        self.closeHandshakeTimeout = closeHandshakeTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    /// Whether the phone reads what it is sent (the channel's buffered writes are under NIO's
    /// high-water mark): push messages are only written while it does.
    var isReading: Bool { open && (context?.channel.isWritable ?? false) }

    /// Sends one push message.
    func deliver(_ message: [UInt8]) {
        guard open, let context else { return }
        let buffer = context.channel.allocator.buffer(bytes: message)
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .binary, data: buffer)), promise: nil)
    }

    /// Closes the push channel with `code`.
    func sendClose(code: WebSocketCloseCode, reason: String) {
        guard open, let context else { return }
        open = false
        directory.detach(self, contactID: contactID)
        let body = CloseFramePayload.encode(code: code, reason: reason, allocator: context.channel.allocator)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: body)), promise: nil)
        context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(closeHandshakeTimeout)) { channel.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .binary where open:
            do {
                directory.refused(try PushRefusal(bytes: Array(frame.unmaskedData.readableBytesView)), contactID: contactID)
            } catch {
                sendClose(code: .policyViolation, reason: "malformed push refusal")
            }
        case .text where open:
            sendClose(code: .unsupportedData, reason: "push channel messages are binary")
        case .ping where open:
            // As on a tunnel connection (``RelayPeerHandler``): only while the phone reads what it
            // is sent, and within the pong budget (Docs/RELAY.md, "Back-pressure and caps").
            guard context.channel.isWritable, pongs.take(now: context.eventLoop.now) else { return }
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .connectionClose:
            if open {
                open = false
                directory.detach(self, contactID: contactID)
                let echo = CloseFramePayload.encode(code: .normalClosure, reason: "", allocator: context.channel.allocator)
                let channel = context.channel
                context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: echo)))
                    .whenComplete { _ in channel.close(promise: nil) }
            } else {
                context.close(promise: nil)
            }
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        open = false
        directory.detach(self, contactID: contactID)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        open = false
        directory.detach(self, contactID: contactID)
        context.close(promise: nil)
    }
}
