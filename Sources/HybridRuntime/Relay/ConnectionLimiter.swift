import NIOCore
import NIOHTTP1
import Synchronization

/// Answers a connection the relay will not serve with a fixed HTTP response, without parsing the
/// request: no HTTP decoder, no upgrade handler, no tunnel lookup. Used beyond `--max-connections`
/// (``RelayConfiguration/maxConnections``, 503) and for the admission caps of ``AdmissionLedger``
/// (pending upgrades 503, connections per source address 429). The response is written as soon as
/// the connection is active, then the write side is shut down (FIN) and what the client still sends
/// is discarded until it closes; a timer drops the connection after the close timeout whatever the
/// client does. While ``Lingering/crowd`` refused connections already wait so (a burst at the
/// open-file limit, where each holds a descriptor the next accept needs), a new one is dropped
/// ``Lingering/crowdedLinger`` after its answer instead: a burst of 400 silent clients at a
/// 256-descriptor limit got 503s at 20 a second, most of them none before they gave up.
/// `hybrid-sim rp` and `desktop --web` answer their own connections past their caps with it too (``ConnectionCap``).
package final class OverCapacityHandler: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = ByteBuffer

    /// The whole response beyond `--max-connections`.
    package static let response = fixedResponse(.serviceUnavailable, body: "too many connections; try again later")

    /// A complete `text/plain` HTTP/1.1 response with `Connection: close`: every refusal the relay
    /// writes itself (over capacity, admission caps, refused requests) is made here.
    static func fixedResponse(_ status: HTTPResponseStatus, body: String, headers: [(String, String)] = []) -> String {
        let body = body + "\n"
        let extra = headers.map { "\($0.0): \($0.1)\r\n" }.joined()
        return "HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\nContent-Type: text/plain; charset=utf-8\r\n" + extra
            + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body
    }

    /// The refused connections of a process still waiting for their clients to close.
    package final class Lingering: Sendable {
        /// With this many already waiting, a new refusal waits only ``crowdedLinger``.
        package static let crowd = 16
        package static let crowdedLinger = Duration.milliseconds(100)
        /// The process's count (every server in it refuses through it).
        package static let shared = Lingering()

        private let count = Atomic<Int>(0)

        package init() {}

        /// Counts one more; whether ``crowd`` or more were already waiting.
        func enter() -> Bool { count.add(1, ordering: .relaxed).newValue > Self.crowd }
        func leave() { count.subtract(1, ordering: .relaxed) }
        /// Refused connections waiting now.
        package var waiting: Int { count.load(ordering: .relaxed) }
    }

    private let response: String
    private let closeTimeout: Duration
    private let lingering: Lingering
    private var answered = false
    private var counted = false
    private var timer: Scheduled<Void>?

    package init(response: String = OverCapacityHandler.response, closeTimeout: Duration, lingering: Lingering = .shared) {
        self.response = response
        self.closeTimeout = closeTimeout
        self.lingering = lingering
    }

    package func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { answer(context: context) }
    }

    package func channelActive(context: ChannelHandlerContext) {
        answer(context: context)
        context.fireChannelActive()
    }

    private func answer(context: ChannelHandlerContext) {
        guard !answered else { return }
        answered = true
        counted = true
        let crowded = lingering.enter()
        let channel = context.channel
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(crowded ? min(closeTimeout, Lingering.crowdedLinger) : closeTimeout)) {
            channel.close(promise: nil)
        }
        let buffer = channel.allocator.buffer(string: response)
        context.writeAndFlush(NIOAny(buffer)).whenComplete { result in
            switch result {
            case .success: channel.close(mode: .output, promise: nil)
            case .failure: channel.close(promise: nil)
            }
        }
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // The request is not looked at.
    }

    package func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        leave()
        context.fireChannelInactive()
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        leave()
    }

    private func leave() {
        guard counted else { return }
        counted = false
        lingering.leave()
    }

    package func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }
}

/// A small HTTP server's open connections against its cap (`hybrid-sim rp`, `desktop --web`): a
/// connection past it gets ``OverCapacityHandler``'s fixed 503 without its request being parsed,
/// so the server never nears the process's open-file limit, where accepting spins.
///
/// It also gives the memory a burst of connections used back to the system once the server is
/// idle, as the relay's ``IdleMemoryTrim`` does: `trim` (glibc's `malloc_trim(0)`) runs `idleDelay`
/// after the last open connection closed, if none opened meanwhile; at most one is scheduled at a
/// time. Without it `rp`'s RSS stayed at an attack's peak (158 MB after 1,000 held bodies).
package final class ConnectionCap: Sendable {
    private let open = Mutex(0)
    /// An idle trim is scheduled and has not run yet.
    private let trimScheduled = Atomic<Bool>(false)
    private let idleDelay: TimeAmount
    private let trim: @Sendable () -> Void
    /// The most connections counted at once.
    package let limit: Int

    /// `trim` (default: glibc's `malloc_trim(0)`) runs `idleDelay` after the count fell to zero, if
    /// it is still zero then.
    package init(limit: Int, idleDelay: TimeAmount = .seconds(1), trim: (@Sendable () -> Void)? = nil) {
        self.limit = limit
        self.idleDelay = idleDelay
        self.trim = trim ?? { _ = IdleMemoryTrim.mallocTrim?(0) }
    }

    /// The connections counted now.
    package var openConnections: Int { open.withLock { $0 } }

    /// Call in a child channel's initializer, on its loop. Counts `channel` until it closes and
    /// returns `true`; past the cap, installs ``OverCapacityHandler`` instead and returns `false`.
    package func admit(_ channel: any Channel) throws -> Bool {
        let counted = open.withLock { open in
            guard open < limit else { return false }
            open += 1
            return true
        }
        guard counted else {
            try channel.pipeline.syncOperations.addHandler(OverCapacityHandler(closeTimeout: .seconds(2)))
            return false
        }
        let loop = channel.eventLoop
        channel.closeFuture.whenComplete { [self] _ in
            let idle = open.withLock { open in
                open -= 1
                return open == 0
            }
            if idle { scheduleIdleTrim(on: loop) }
        }
        return true
    }

    private func scheduleIdleTrim(on loop: any EventLoop) {
        guard trimScheduled.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged else { return }
        loop.scheduleTask(in: idleDelay) { [self] in
            trimScheduled.store(false, ordering: .relaxed)
            if openConnections == 0 { trim() }
        }
    }
}
