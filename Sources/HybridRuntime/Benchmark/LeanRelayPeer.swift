import CTAP2
import Foundation
import HybridCore
import NIOCore
import NIOWebSocket

/// One WebSocket client connection of the lean load generator (``RelayLoadBenchmark/Generator/lean``):
/// the upgrade and the framing written out by hand (RFC 6455 §4.1, §5.2) in a single handler, so a
/// relayed message costs the generator a `read`, a parse and (for an echo) one pre-encoded `write`,
/// all on the connection's event loop, with no Swift task, future or copy per message.
///
/// Strict where it measures (the 101, `Sec-WebSocket-Accept`, the `fido.cable` subprotocol, the
/// routing ID of `/cable/new`), tolerant in what a relay may legally send (fragmented messages,
/// pings, masked server frames are unmasked). `@unchecked Sendable` only so that the generator can
/// hand it to its channel's initializer: it is confined to that channel's event loop.
final class LeanRelayPeer: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum State {
        /// The upgrade request went out; the response head is being collected.
        case upgrading(ByteBuffer)
        /// Frames flow.
        case open
        /// A close frame arrived or the connection failed; nothing more is delivered.
        case finished
    }

    /// The largest response head accepted, bytes.
    static let maxHeadSize = 16 * 1024

    private let path: String
    private let request: ByteBuffer
    private let expectedAccept: String
    private let maxMessageSize: Int
    private let upgrade: EventLoopPromise<[UInt8]?>
    private var state: State
    private var context: ChannelHandlerContext?
    /// Bytes of a frame that is not complete yet.
    private var partial: ByteBuffer?
    /// Fragments of a message that is not complete yet.
    private var fragments: ByteBuffer?
    /// Bytes NIO delivers while a read is being handled wait for it (``ReadsInOrder``).
    private var reads = ReadsInOrder()
    private var needsFlush = false
    /// Whether this side sent its close frame.
    private(set) var sentClose = false
    /// A whole binary message arrived (its own buffer, as the relay's frame reader hands it on).
    var onMessage: ((ByteBuffer) -> Void)?
    /// The connection stopped carrying messages: why, as a ``RelayLoadBenchmark/failureName(_:)``.
    var onEnd: ((RuntimeError) -> Void)?

    /// A peer that asks for `path` on `authority` once connected; `upgrade` gets the routing ID
    /// (`nil` when the response has none) or the failure.
    init(path: String, authority: String, maxMessageSize: Int, upgrade: EventLoopPromise<[UInt8]?>) {
        let key = Data(HostileWire.randomBytes(16)).base64EncodedString()
        self.path = path
        self.request = ByteBuffer(
            string: WebSocketUpgradeRequest.text(
                path: path, host: authority, key: key, extra: ["Origin: ws://\(authority)"]))
        self.expectedAccept = WebSocketAccept.value(forKey: key)
        self.maxMessageSize = maxMessageSize
        self.upgrade = upgrade
        self.state = .upgrading(ByteBuffer())
    }

    /// A masked binary frame carrying `payload`, encoded once and written as often as needed.
    static func binaryFrame(_ payload: [UInt8]) -> ByteBuffer {
        ByteBuffer(bytes: HostileWire.frame(.binary, payload))
    }

    // MARK: - Writing

    /// Queues `frame` (pre-encoded and masked); flushed by ``flush()`` or at the end of the read burst.
    func write(_ frame: ByteBuffer) {
        guard case .open = state, let context else { return }
        context.write(wrapOutboundOut(frame), promise: nil)
        needsFlush = true
    }

    /// Flushes what ``write(_:)`` queued.
    func flush() {
        guard needsFlush, let context else { return }
        needsFlush = false
        context.flush()
    }

    /// Sends a close frame (1000) unless one was sent; the relay answers and closes the connection.
    func sendClose() {
        guard !sentClose, let context else { return }
        sentClose = true
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: HostileWire.frame(.close, [0x03, 0xE8]))), promise: nil)
    }

    // MARK: - Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func channelActive(context: ChannelHandlerContext) {
        context.writeAndFlush(wrapOutboundOut(request), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // A read delivered from inside this handler's own flush waits for the current one.
        guard var bytes = reads.begin(unwrapInboundIn(data)) else { return }
        repeat { handleRead(bytes, context: context) } while reads.next(into: &bytes)
    }

    private func handleRead(_ input: ByteBuffer, context: ChannelHandlerContext) {
        var bytes = input
        switch state {
        case .finished:
            return
        case .upgrading(var head):
            head.writeBuffer(&bytes)
            guard readHead(&head, context: context) else { return }
            bytes = head
        case .open:
            break
        }
        if var earlier = partial {
            partial = nil
            earlier.writeBuffer(&bytes)
            bytes = earlier
        }
        readFrames(&bytes, context: context)
        if bytes.readableBytes > 0, case .open = state { partial = bytes }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flush()
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        // A refusal whose body did not arrive whole before the close: what there is of it.
        if case .upgrading(let head) = state, let end = HostileWire.headEnd(Array(head.readableBytesView.prefix(Self.maxHeadSize))) {
            let bytes = Array(head.readableBytesView)
            self.end(refusal(Array(bytes[..<end]), body: Array(bytes[end...])))
        }
        end(RuntimeError(.connectionFailed, "the relay closed the connection"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        end(RuntimeError(.connectionFailed, "\(error)"))
        context.close(promise: nil)
    }

    /// Why the connection ended (the first reason), once it has.
    private(set) var endError: RuntimeError?

    /// Stops delivering and reports `error` (to the upgrade if it is still running).
    func end(_ error: RuntimeError) {
        if case .finished = state { return }
        if case .upgrading = state { upgrade.fail(error) }
        state = .finished
        endError = error
        onEnd?(error)
        onMessage = nil
        onEnd = nil
    }

    // MARK: - Parsing

    /// Reads the response head from `head`; `true` once the 101 was accepted (`head` then holds what
    /// followed it), `false` while more is needed or after a failure.
    private func readHead(_ head: inout ByteBuffer, context: ChannelHandlerContext) -> Bool {
        let view = head.readableBytesView
        guard let end = HostileWire.headEnd(Array(view.prefix(Self.maxHeadSize))) else {
            if head.readableBytes >= Self.maxHeadSize {
                fail(context, RuntimeError(.handshakeFailed, "response head over \(Self.maxHeadSize) bytes"))
            } else {
                state = .upgrading(head)
            }
            return false
        }
        let headBytes = Array(view.prefix(end))
        guard let status = HostileWire.status(headBytes) else {
            fail(context, RuntimeError(.handshakeFailed, "malformed HTTP response"))
            return false
        }
        guard status == 101 else {
            // The relay's reason is the body: wait for its Content-Length (up to a head's size),
            // so the failure says which limit was hit, in the words the tasks generator reports.
            let length = HostileWire.responseHeaders(headBytes)["content-length"].flatMap { Int($0) } ?? 0
            guard view.count >= end + min(max(length, 0), Self.maxHeadSize) else {
                state = .upgrading(head)
                return false
            }
            fail(context, refusal(headBytes, body: Array(view.dropFirst(end).prefix(max(length, 0)))))
            return false
        }
        head.moveReaderIndex(forwardBy: end)
        let headers = HostileWire.responseHeaders(headBytes)
        guard headers["sec-websocket-accept"] == expectedAccept else {
            fail(context, RuntimeError(.handshakeFailed, "wrong Sec-WebSocket-Accept"))
            return false
        }
        guard headers["sec-websocket-protocol"] == HybridConstants.webSocketProtocol else {
            fail(context, RuntimeError(.handshakeFailed, "the relay did not select \(HybridConstants.webSocketProtocol)"))
            return false
        }
        state = .open
        upgrade.succeed(HostileWire.routingID(headBytes))
        return true
    }

    /// A refused upgrade, described as the tasks generator's client describes it (status, reason
    /// phrase and the relay's text).
    private func refusal(_ headBytes: [UInt8], body: [UInt8]) -> RuntimeError {
        let (status, reason) = HostileWire.statusLine(headBytes) ?? (0, "")
        return RuntimeError.upgradeRejected(
            path: path, status: status, statusText: reason, detail: String(decoding: body, as: UTF8.self))
    }

    /// Handles every complete frame in `bytes`, leaving an incomplete one there. The frames are read
    /// by the relay's own reader (``RelayFrameReader``: NIO's decoder's length and control-frame
    /// checks; a server's frames are unmasked, which it reads as well).
    private func readFrames(_ bytes: inout ByteBuffer, context: ChannelHandlerContext) {
        while case .open = state {
            let next: ClientFrame?
            do {
                next = try RelayFrameReader.next(from: &bytes, maxFrameSize: maxMessageSize, allocator: context.channel.allocator)
            } catch NIOWebSocketError.invalidFrameLength {
                return fail(context, RuntimeError(.messageTooLarge, "a frame over \(maxMessageSize) bytes"))
            } catch {
                return fail(context, RuntimeError(.protocolViolation, "a broken frame from the relay (\(error))"))
            }
            guard let next else { return }
            frame(fin: next.fin, opcode: UInt8(webSocketOpcode: next.opcode), payload: next.payload, context: context)
        }
    }

    private func frame(fin: Bool, opcode: UInt8, payload: ByteBuffer, context: ChannelHandlerContext) {
        var payload = payload
        switch HostileWire.Opcode(rawValue: opcode) {
        case .binary where fin && fragments == nil:
            onMessage?(payload)
        case .binary where fragments == nil:
            fragments = payload
        case .continuation where fragments != nil:
            fragments!.writeBuffer(&payload)
            guard fragments!.readableBytes <= maxMessageSize else {
                return fail(context, RuntimeError(.messageTooLarge, "a message over \(maxMessageSize) bytes"))
            }
            if fin, let message = fragments {
                fragments = nil
                onMessage?(message)
            }
        case .ping:
            context.write(wrapOutboundOut(ByteBuffer(bytes: HostileWire.frame(.pong, Array(payload.readableBytesView)))), promise: nil)
            needsFlush = true
        case .pong:
            break
        case .close:
            let (code, reason) = CloseFramePayload.decode(payload)
            // RFC 6455 §5.5.1: answer a close frame with one (the relay then closes the connection).
            if !sentClose {
                sentClose = true
                let echo = code.map { [UInt8($0.rawValue >> 8), UInt8($0.rawValue & 0xFF)] } ?? []
                context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: HostileWire.frame(.close, echo))), promise: nil)
            }
            // Worded as the runtime's client words it, with the relay's reason ("more than 16
            // messages from the desktop (joiner)"), so both generators report a close alike.
            end(RuntimeError.closed(code ?? WebSocketCloseCode(rawValue: 1005), reason))
        default:
            fail(context, RuntimeError(.protocolViolation, "unexpected frame (opcode \(opcode), fin \(fin))"))
        }
    }

    private func fail(_ context: ChannelHandlerContext, _ error: RuntimeError) {
        end(error)
        context.close(promise: nil)
    }
}
