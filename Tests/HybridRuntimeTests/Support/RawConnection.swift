@testable import HybridRuntime
import NIOCore
import NIOPosix
import Synchronization

/// A plain TCP connection for hand-written HTTP and WebSocket bytes: what the real client cannot
/// express (no subprotocol, POST, bad paths, text or unmasked frames, stalled requests).
final class RawConnection: Sendable {
    private let channel: Channel
    private let collector: ByteCollector

    private init(channel: Channel, collector: ByteCollector) {
        self.channel = channel
        self.collector = collector
    }

    /// Connects to 127.0.0.1:`port`.
    static func connect(port: Int) async throws -> RawConnection {
        let collector = ByteCollector()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(2))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(CollectingHandler(collector: collector))
                }
            }
            .connect(host: "127.0.0.1", port: port)
            .get()
        return RawConnection(channel: channel, collector: collector)
    }

    /// Writes raw bytes.
    func write(_ bytes: [UInt8]) async throws {
        try await channel.writeAndFlush(channel.allocator.buffer(bytes: bytes)).get()
    }

    /// Writes a string as UTF-8.
    func write(_ text: String) async throws {
        try await write(Array(text.utf8))
    }

    /// Waits until `predicate` holds on everything received so far (or the connection closed, or
    /// `timeout` passed) and returns the received bytes.
    func read(timeout: Duration = .seconds(3), until predicate: @Sendable ([UInt8]) -> Bool) async -> [UInt8] {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let (bytes, closed) = collector.snapshot
            if closed || predicate(bytes) { return bytes }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return collector.snapshot.bytes
    }

    /// Waits for the end of the HTTP response head and returns it as text.
    func readResponseHead(timeout: Duration = .seconds(3)) async -> String {
        let bytes = await read(timeout: timeout) { bytes in
            String(decoding: bytes, as: UTF8.self).contains("\r\n\r\n")
        }
        let text = String(decoding: bytes, as: UTF8.self)
        return text.components(separatedBy: "\r\n\r\n").first ?? text
    }

    /// Waits until the peer closed the connection; `true` if it did within `timeout`.
    func waitForClose(timeout: Duration = .seconds(3)) async -> Bool {
        _ = await read(timeout: timeout) { _ in false }
        return collector.snapshot.closed
    }

    /// Bytes received so far.
    var received: [UInt8] { collector.snapshot.bytes }

    /// Drops the connection.
    func close() async {
        try? await channel.close().get()
    }

    /// An HTTP/1.1 WebSocket upgrade request for `path`.
    static func upgradeRequest(
        path: String,
        method: String = "GET",
        subprotocol: String? = "fido.cable",
        upgrade: Bool = true
    ) -> String {
        WebSocketUpgradeRequest.text(
            path: path, method: method, upgrade: upgrade, subprotocol: subprotocol, extra: ["Content-Length: 0"])
    }

    /// The status code of an HTTP response head ("HTTP/1.1 404 Not Found" → 404).
    static func status(of head: String) -> Int? {
        let parts = head.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2 else { return nil }
        return Int(parts[1])
    }

    /// A client WebSocket frame, masked unless `mask` is nil (``HostileWire/frame(opcode:_:fin:key:declaredLength:)``).
    static func frame(opcode: UInt8, payload: [UInt8], fin: Bool = true, mask: [UInt8]? = [1, 2, 3, 4]) -> [UInt8] {
        HostileWire.frame(opcode: opcode, payload, fin: fin, key: mask)
    }

    /// Parses server frames (unmasked) from `bytes`: (opcode, payload) pairs.
    static func serverFrames(in bytes: [UInt8]) -> [(opcode: UInt8, payload: [UInt8])] {
        HostileWire.frames(in: bytes, from: 0).map { ($0.opcode, Array($0.payload)) }
    }
}

/// Thread-safe store of received bytes and the closed flag.
final class ByteCollector: Sendable {
    private let state = Mutex<(bytes: [UInt8], closed: Bool)>(([], false))

    var snapshot: (bytes: [UInt8], closed: Bool) { state.withLock { $0 } }

    func append(_ bytes: [UInt8]) { state.withLock { $0.bytes += bytes } }

    func markClosed() { state.withLock { $0.closed = true } }
}

/// Feeds a ``ByteCollector``.
final class CollectingHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let collector: ByteCollector

    init(collector: ByteCollector) {
        self.collector = collector
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        collector.append(Array(unwrapInboundIn(data).readableBytesView))
    }

    func channelInactive(context: ChannelHandlerContext) {
        collector.markClosed()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }
}
