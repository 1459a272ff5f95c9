import Dispatch
import HybridRuntime
import NIOCore
import NIOEmbedded
import NIOPosix
import Synchronization

/// Feeds raw bytes to one `hybrid-sim rp` connection's real pipeline (``RequestHeadWatch``, NIO's
/// HTTP parser, the request deadline, the request handler with its body limits and
/// ``ByteBudget``) on an `EmbeddedChannel`, with no socket: the fuzz target for the relying-party
/// server's request handling (`Docs/ROBUSTNESS.md`). A request that reaches the service is
/// answered by the real ``RelyingPartyService``, waited for on the probe's thread.
package enum RelyingPartyRequestProbe {
    /// What the server did with one connection's bytes.
    package struct Outcome: Sendable {
        /// Everything the server wrote back.
        package var response: [UInt8]
        /// The channel was still open after its input ended, its answer was written and every
        /// timer ran (must be `false`).
        package var leftOpen: Bool
        /// Body bytes still reserved in the probe's ``ByteBudget`` afterwards (must be 0).
        package var leftReserved: Int
        /// The head scan gave the same result read at once, in the probe's two writes and a byte
        /// at a time (must be `true`).
        package var scanConsistent: Bool
    }

    /// The port the probe's channel is bound to (its requests name `Host: 127.0.0.1:8080`).
    package static let port = 8080

    /// Runs `bytes` as the whole of one client's input, written in two parts split at `split`
    /// (clamped), then half-closes the input when `halfClose`, runs every timer (deadline, linger)
    /// and closes.
    package static func run(
        _ bytes: [UInt8], split: Int, halfClose: Bool, service: RelyingPartyService, maximumBodyBytesInFlight: Int = 256 << 10
    ) -> Outcome {
        let split = min(max(split, 0), bytes.count)
        let budget = ByteBudget(limit: maximumBodyBytesInFlight)
        let channel = EmbeddedChannel()
        var response: [UInt8] = []
        func drain() {
            while let buffer = try? channel.readOutbound(as: ByteBuffer.self) {
                response += buffer.readableBytesView
            }
        }
        do {
            channel.localAddress = try SocketAddress(ipAddress: "127.0.0.1", port: port)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40000)).wait()
            try channel.pipeline.syncOperations.configureLocalHTTPServer(
                requestDeadline: RelyingPartyHTTPServer.requestDeadline,
                maximumRequestBytes: RelyingPartyHTTPServer.maximumRequestBytes)
            try channel.pipeline.syncOperations.addHandler(
                RequestHandler(service: service, budget: budget) { request in wait { await service.handle(request) } })
            for part in [bytes[..<split], bytes[split...]] where !part.isEmpty && channel.isActive {
                try channel.writeInbound(channel.allocator.buffer(bytes: part))
                drain()
            }
            if halfClose, channel.isActive { channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed) }
        } catch {
            // A parser error the handlers did not catch ends the connection; what was written is the answer.
        }
        drain()
        channel.embeddedEventLoop.advanceTime(by: .seconds(600))
        drain()
        let leftOpen = channel.isActive
        _ = try? channel.close().wait()
        channel.embeddedEventLoop.advanceTime(by: .seconds(600))
        drain()
        _ = try? channel.finish()
        return Outcome(
            response: response, leftOpen: leftOpen, leftReserved: budget.reserved,
            scanConsistent: scanConsistent(bytes, split: split))
    }

    /// Whether ``RequestHeadScan`` reads `bytes` the same at once, in two parts split at `split`
    /// and a byte at a time: what it decided on a prefix never depends on how the bytes arrived.
    static func scanConsistent(_ bytes: [UInt8], split: Int) -> Bool {
        let buffer = ByteBuffer(bytes: bytes)
        var whole = RequestHeadScan()
        whole.read(buffer.readableBytesView)
        var parts = RequestHeadScan()
        parts.read(ByteBuffer(bytes: bytes[..<split]).readableBytesView)
        parts.read(ByteBuffer(bytes: bytes[split...]).readableBytesView)
        var single = RequestHeadScan()
        for index in bytes.indices {
            let before = single
            single.read(buffer.getSlice(at: index, length: 1)!.readableBytesView)
            // A decision once taken stays: the head ended, a bare LF seen, counts only grow.
            if before.headEnded && single != before { return false }
            if before.bareLineFeed && !single.bareLineFeed { return false }
            if single.headerFields < before.headerFields || single.headBytes < before.headBytes { return false }
            if before.requestLineEnded && single.requestLineBytes != before.requestLineBytes { return false }
        }
        return whole == parts && whole == single
    }

    /// The executor of ``wait(_:)``'s work: a loop of its own, not Swift concurrency's pool.
    private static let executor = EventLoopTaskExecutor(MultiThreadedEventLoopGroup(numberOfThreads: 1).next())

    /// `work`'s result, waited for on this thread. The work runs on a loop of its own (its actor
    /// calls included, SE-0417), never on Swift concurrency's pool: the caller may be one of the
    /// pool's threads (a test), and blocked callers could otherwise take every thread the work needs.
    package static func wait<T: Sendable>(_ work: @escaping @Sendable () async -> T) -> T {
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task(executorPreference: executor) {
            let value = await work()
            result.withLock { $0 = value }
            done.signal()
        }
        done.wait()
        return result.withLock { $0! }
    }
}
