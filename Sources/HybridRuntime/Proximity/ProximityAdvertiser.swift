#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// The phone side of the proximity stub: sends one advert as a UDP datagram to the desktop's
/// scanner every ``Configuration/interval`` until ``stop()`` or until it gives up.
public final class ProximityAdvertiser: Sendable {
    /// Where and how to advertise.
    public struct Configuration: Sendable {
        /// The scanner's address (`--proximity udp://HOST:PORT`).
        public var target: ProximityEndpoint
        /// Time between two datagrams. Default 100 ms.
        public var interval: Duration = ProximityDefaults.advertInterval
        /// Stop by itself after this long; `nil` advertises until ``ProximityAdvertiser/stop()``.
        /// Default 120 s (a tunnel's lifetime).
        public var giveUpAfter: Duration? = ProximityDefaults.giveUpAfter
        /// Claimed RSSI in dBm (`--rssi`). Default -45.
        public var rssi: Int8 = ProximityDefaults.rssi
        /// Service UUID to advertise under. Default 0xFFF9 (FIDO).
        public var serviceUUID: ProximityServiceUUID = .fido
        /// Called once, from the event loop, when ``ProximityAdvertiser/refusalLimit`` sends have
        /// failed with ECONNREFUSED (nothing is bound at the target: the kernel's ICMP port
        /// unreachable comes back on the next send), after the advertiser stopped. `nil`: keep
        /// sending regardless. Not used with a `ProximityHub`'s socket.
        public var onUnreachable: (@Sendable (RuntimeError) -> Void)? = nil

        /// Advertise to `target` with the defaults.
        public init(target: ProximityEndpoint) {
            self.target = target
        }
    }

    /// The configuration it runs with.
    public let configuration: Configuration
    private let datagram: ProximityDatagram
    private let group: any EventLoopGroup
    /// A socket it sends from instead of binding its own (``ProximityHub/sendChannel``); left open on stop.
    private let sharedChannel: Channel?
    private let logger: Logger

    private enum Phase {
        case idle
        case running(Channel, RepeatedTask)
        case finished
    }

    private struct State {
        var phase = Phase.idle
        var sent = 0
        var gaveUp = false
        var refused = 0
        var unreachable: RuntimeError? = nil
    }

    /// Refusals (ECONNREFUSED: a send, or the socket's error, after an ICMP port unreachable) before
    /// the target counts as unreachable: 1 to 2 s of adverts at the default interval (measured: about
    /// 1 s), long enough for a scanner that binds a moment late.
    public static let refusalLimit = 10

    private let state = Mutex(State())

    /// An advertiser for `advert` (exactly 20 bytes, else `.wrongAdvertLength`).
    public init(
        advert: [UInt8],
        configuration: Configuration,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "hybrid-sim.proximity")
    ) throws {
        self.datagram = try ProximityDatagram(
            serviceUUID: configuration.serviceUUID,
            rssi: configuration.rssi,
            advert: advert
        )
        self.configuration = configuration
        self.group = group
        self.sharedChannel = nil
        self.logger = logger
    }

    /// An advertiser that sends from `hub`'s send socket (``ProximityHub``) to `hub`'s scan socket
    /// instead of binding a socket of its own (`configuration.target` is replaced by the hub's);
    /// ``stop()`` leaves the socket open.
    init(advert: [UInt8], configuration: Configuration, sharing hub: ProximityHub, logger: Logger) throws {
        var configuration = configuration
        configuration.target = hub.scanEndpoint
        self.datagram = try ProximityDatagram(
            serviceUUID: configuration.serviceUUID,
            rssi: configuration.rssi,
            advert: advert
        )
        self.configuration = configuration
        self.group = hub.sendChannel.eventLoop
        self.sharedChannel = hub.sendChannel
        self.logger = logger
    }

    /// An ephemeral UDP socket connected to `target` that ignores socket errors: connected, so
    /// that an ICMP port unreachable fails the next send with ECONNREFUSED everywhere (Linux
    /// reports it on unconnected sockets too, gVisor does not).
    /// Errors reach `onError` (a read or `SO_ERROR` may take the refusal before the next send does).
    static func connectSendSocket(
        to target: SocketAddress, group: any EventLoopGroup, onError: @escaping @Sendable (any Error) -> Void
    ) async throws -> Channel {
        try await sendBootstrap(group: group, onError: onError).connect(to: target).get()
    }

    /// Binds an ephemeral UDP socket on `localHost` that ignores socket errors.
    static func bindSendSocket(localHost: String, group: any EventLoopGroup) async throws -> Channel {
        try await sendBootstrap(group: group, onError: nil).bind(to: SocketAddress(ipAddress: localHost, port: 0)).get()
    }

    /// A datagram bootstrap whose channels ignore socket errors (passing them to `onError`).
    private static func sendBootstrap(group: any EventLoopGroup, onError: (@Sendable (any Error) -> Void)?) -> DatagramBootstrap {
        DatagramBootstrap(group: group).channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(IgnoreErrorsHandler(onError: onError))
            }
        }
    }

    /// Connects an ephemeral UDP socket to the target (`localhost` is 127.0.0.1) and starts sending
    /// (the first datagram goes at once).
    ///
    /// - Throws: `.invalidAddress` (target not loopback or unresolvable), `.bindFailed`,
    ///   `.invalidState` if already started.
    public func start() async throws {
        let target = configuration.target
        guard LoopbackAddress.isLoopback(target.host) else {
            throw RuntimeError(.invalidAddress, "proximity target \(target) is not a loopback address")
        }
        let address: SocketAddress
        do {
            address = try SocketAddress.proximity(host: target.host, port: target.port)
        } catch {
            throw RuntimeError(.invalidAddress, "cannot resolve proximity target \(target): \(RuntimeError.systemReason(error))")
        }
        try state.withLock { state in
            guard case .idle = state.phase else { throw RuntimeError(.invalidState, "advertiser already started") }
            state.phase = .finished
        }
        let channel: Channel
        do {
            if let sharedChannel {
                channel = sharedChannel
            } else {
                channel = try await Self.connectSendSocket(to: address, group: group) { [self] error in self.sendFailed(error) }
            }
        } catch {
            state.withLock { $0.phase = .idle }
            throw RuntimeError(.bindFailed, "advertiser could not bind a UDP socket: \(RuntimeError.systemReason(error))")
        }
        let deadline = configuration.giveUpAfter.map { NIODeadline.now() + TimeAmount($0) }
        let payload = datagram.bytes
        let task = channel.eventLoop.scheduleRepeatedTask(
            initialDelay: .zero,
            delay: TimeAmount(configuration.interval)
        ) { [self] task in
            if let deadline, NIODeadline.now() >= deadline {
                self.giveUp(task: task, channel: channel)
                return
            }
            let buffer = channel.allocator.buffer(bytes: payload)
            if sharedChannel == nil {
                // Its own socket is connected to the target: plain bytes, and a refusal fails the write.
                channel.writeAndFlush(buffer).whenFailure { error in self.sendFailed(error) }
            } else {
                channel.writeAndFlush(AddressedEnvelope(remoteAddress: address, data: buffer), promise: nil)
            }
            self.state.withLock { $0.sent += 1 }
        }
        state.withLock { $0.phase = .running(channel, task) }
        logger.info("advertising to \(target) every \(configuration.interval.humanReadable)")
    }

    /// Counts a refused send; the ``refusalLimit``th stops advertising and reports the target
    /// unreachable (when someone listens for that: ``Configuration/onUnreachable``).
    private func sendFailed(_ error: any Error) {
        guard configuration.onUnreachable != nil, let error = error as? IOError, error.errnoCode == ECONNREFUSED else { return }
        let target = configuration.target
        let unreachable = RuntimeError(
            .invalidAddress,
            "nothing receives proximity adverts at \(target) (connection refused): the desktop's scanner listens on "
                + "udp://127.0.0.1:PORT (PORT its --proximity-port, default \(ProximityDefaults.scannerPort))")
        let running: (Channel, RepeatedTask)? = state.withLock { state in
            state.refused += 1
            guard state.refused >= Self.refusalLimit, state.unreachable == nil, case .running(let channel, let task) = state.phase
            else { return nil }
            state.unreachable = unreachable
            state.phase = .finished
            return (channel, task)
        }
        guard let (channel, task) = running else { return }
        task.cancel()
        channel.close(promise: nil)
        logger.notice("\(unreachable.reason)")
        configuration.onUnreachable?(unreachable)
    }

    private func giveUp(task: RepeatedTask, channel: Channel) {
        task.cancel()
        let wasRunning: Bool = state.withLock { state in
            guard case .running = state.phase else { return false }
            state.phase = .finished
            state.gaveUp = true
            return true
        }
        if wasRunning {
            logger.notice("gave up advertising after \(configuration.giveUpAfter?.humanReadable ?? "")")
            if sharedChannel == nil { channel.close(promise: nil) }
        }
    }

    /// Stops sending and closes the socket. Idempotent.
    public func stop() async {
        let running: (Channel, RepeatedTask)? = state.withLock { state in
            guard case .running(let channel, let task) = state.phase else {
                state.phase = .finished
                return nil
            }
            state.phase = .finished
            return (channel, task)
        }
        guard let (channel, task) = running else { return }
        let cancelled = channel.eventLoop.makePromise(of: Void.self)
        task.cancel(promise: cancelled)
        try? await cancelled.futureResult.get()
        if sharedChannel == nil { try? await channel.close().get() }
    }

    /// Datagrams sent so far.
    public var sentCount: Int { state.withLock { $0.sent } }

    /// Whether it is still sending.
    public var isRunning: Bool {
        state.withLock { state in
            if case .running = state.phase { return true }
            return false
        }
    }

    /// Why it stopped by itself because nothing receives at the target (``refusalLimit``); `nil` otherwise.
    public var unreachable: RuntimeError? { state.withLock { $0.unreachable } }

    /// Whether it stopped by itself because ``Configuration/giveUpAfter`` passed.
    public var gaveUp: Bool { state.withLock { $0.gaveUp } }
}

/// Swallows socket errors (e.g. ECONNREFUSED after an ICMP port-unreachable), passing them to
/// `onError` if given: the advertiser keeps sending whether or not a scanner listens yet, and
/// counts the refusals.
final class IgnoreErrorsHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = NIOAny

    private let onError: (@Sendable (any Error) -> Void)?

    init(onError: (@Sendable (any Error) -> Void)? = nil) {
        self.onError = onError
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        onError?(error)
    }
}
