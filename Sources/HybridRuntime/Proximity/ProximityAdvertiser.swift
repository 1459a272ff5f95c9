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
    }

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

    /// Binds an ephemeral UDP socket on `localHost` that ignores socket errors.
    static func bindSendSocket(localHost: String, group: any EventLoopGroup) async throws -> Channel {
        try await DatagramBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(IgnoreErrorsHandler())
                }
            }
            .bind(to: SocketAddress(ipAddress: localHost, port: 0))
            .get()
    }

    /// Binds an ephemeral loopback UDP socket and starts sending (the first datagram goes at once).
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
            throw RuntimeError(.invalidAddress, "cannot resolve proximity target \(target): \(error)")
        }
        try state.withLock { state in
            guard case .idle = state.phase else { throw RuntimeError(.invalidState, "advertiser already started") }
            state.phase = .finished
        }
        let localHost = address.protocol == .inet6 ? "::1" : "127.0.0.1"
        let channel: Channel
        do {
            if let sharedChannel {
                channel = sharedChannel
            } else {
                channel = try await Self.bindSendSocket(localHost: localHost, group: group)
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
            channel.writeAndFlush(AddressedEnvelope(remoteAddress: address, data: buffer), promise: nil)
            self.state.withLock { $0.sent += 1 }
        }
        state.withLock { $0.phase = .running(channel, task) }
        logger.info("advertising to \(target) every \(configuration.interval.humanReadable)")
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

    /// Whether it stopped by itself because ``Configuration/giveUpAfter`` passed.
    public var gaveUp: Bool { state.withLock { $0.gaveUp } }
}

/// Swallows socket errors (e.g. ECONNREFUSED after an ICMP port-unreachable): the advertiser keeps
/// sending whether or not a scanner listens yet.
final class IgnoreErrorsHandler: ChannelInboundHandler {
    typealias InboundIn = NIOAny

    func errorCaught(context: ChannelHandlerContext, error: Error) {}
}
