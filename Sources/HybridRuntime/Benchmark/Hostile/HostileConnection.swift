import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A raw TCP connection of the hostile soak (``HostileSoak``): writes whatever bytes an attack
/// wants (half requests, garbage, unmasked frames) from a chosen loopback source address, and
/// collects what the relay sends back and how the connection ended (EOF or reset). Every wait has
/// a deadline; nothing is parsed here (``HostileWire`` reads statuses and close frames).
final class HostileConnection: Sendable {
    /// How the relay ended the connection, once it did.
    enum End: Sendable, Hashable {
        /// An orderly FIN.
        case eof
        /// A TCP reset (or another I/O error).
        case reset
    }

    /// Why ``open(host:port:source:timeout:)`` failed, as a short stable label.
    struct OpenError: Error, Sendable {
        let label: String
    }

    private let channel: Channel
    private let inbox: HostileInbox

    private init(channel: Channel, inbox: HostileInbox) {
        self.channel = channel
        self.inbox = inbox
    }

    /// Connects to `host:port` (an IP address), with the local address bound to `source` (any port) when given.
    static func open(host: String, port: Int, source: String?, timeout: Duration) async throws(OpenError)
        -> HostileConnection
    {
        let inbox = HostileInbox()
        var bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(TimeAmount(timeout))
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(HostileInboxHandler(inbox: inbox))
                }
            }
        if let source {
            do {
                bootstrap = bootstrap.bind(to: try SocketAddress(ipAddress: source, port: 0))
            } catch {
                throw OpenError(label: "bad source address")
            }
        }
        let target: SocketAddress
        do {
            target = try SocketAddress(ipAddress: host, port: port)
        } catch {
            throw OpenError(label: "bad relay address")
        }
        do {
            let channel = try await bootstrap.connect(to: target).get()
            return HostileConnection(channel: channel, inbox: inbox)
        } catch let error as IOError {
            throw OpenError(label: "connect failed: \(RuntimeError.systemReason(error))")
        } catch is ChannelError {
            throw OpenError(label: "connect timed out")
        } catch {
            throw OpenError(label: "connect failed")
        }
    }

    /// Writes `bytes`; `false` if the connection is gone (the write failed).
    @discardableResult
    func write(_ bytes: [UInt8]) async -> Bool {
        (try? await channel.writeAndFlush(channel.allocator.buffer(bytes: bytes)).get()) != nil
    }

    /// Writes `bytes` without waiting for the socket to take them; `false` once the connection is
    /// unwritable (the relay stopped reading) or closed, so a flood never queues without bound here.
    @discardableResult
    func writeIfWritable(_ bytes: [UInt8]) -> Bool {
        guard channel.isActive, channel.isWritable else { return false }
        channel.writeAndFlush(channel.allocator.buffer(bytes: bytes), promise: nil)
        return true
    }

    /// Stops (or resumes) reading from the socket: a client that never reads.
    func setReading(_ reading: Bool) async {
        try? await channel.setOption(.autoRead, value: reading).get()
    }

    /// Waits until `predicate` holds on the bytes received so far, the connection ended, or
    /// `timeout` passed; returns the bytes and the end (if any).
    func wait(timeout: Duration, until predicate: @Sendable ([UInt8]) -> Bool = { _ in false }) async
        -> (bytes: [UInt8], end: End?)
    {
        let deadline = NIODeadline.now() + TimeAmount(timeout)
        while true {
            let (bytes, end, generation) = inbox.snapshot
            if end != nil || predicate(bytes) { return (bytes, end) }
            if NIODeadline.now() >= deadline { return (bytes, nil) }
            await inbox.next(after: generation, deadline: deadline, on: channel.eventLoop)
        }
    }

    /// Closes the connection (idempotent).
    func close() async {
        try? await channel.close().get()
    }
}

/// What a ``HostileConnection`` received, guarded by a lock, and the one task waiting for more.
final class HostileInbox: Sendable {
    /// Bytes kept at most (the response head and the first frames are what attacks look at).
    static let keep = 64 * 1024

    private struct State {
        var bytes: [UInt8] = []
        var end: HostileConnection.End?
        var generation = 0
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    var snapshot: (bytes: [UInt8], end: HostileConnection.End?, generation: Int) {
        state.withLock { ($0.bytes, $0.end, $0.generation) }
    }

    func received(_ bytes: ByteBufferView) {
        event { state in
            let room = Self.keep - state.bytes.count
            if room > 0 { state.bytes += bytes.prefix(room) }
        }
    }

    func ended(_ end: HostileConnection.End) {
        event { state in
            if state.end == nil { state.end = end }
        }
    }

    private func event(_ change: (inout State) -> Void) {
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            change(&state)
            state.generation += 1
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Returns once something arrives after `generation`, or at `deadline`.
    func next(after generation: Int, deadline: NIODeadline, on loop: EventLoop) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let registered = state.withLock { state in
                guard state.generation == generation, state.waiter == nil else { return false }
                state.waiter = continuation
                return true
            }
            guard registered else {
                continuation.resume()
                return
            }
            loop.scheduleTask(deadline: deadline) { [self] in
                let waiter: CheckedContinuation<Void, Never>? = self.state.withLock { state in
                    guard state.generation == generation else { return nil }
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.resume()
            }
        }
    }
}

/// Feeds a ``HostileInbox``.
final class HostileInboxHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let inbox: HostileInbox

    init(inbox: HostileInbox) {
        self.inbox = inbox
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        inbox.received(unwrapInboundIn(data).readableBytesView)
    }

    func channelInactive(context: ChannelHandlerContext) {
        inbox.ended(.eof)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        inbox.ended(.reset)
        context.close(promise: nil)
    }
}
