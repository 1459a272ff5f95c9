import Logging
import NIOCore
import NIOPosix
import Synchronization

/// Where a started relay listens.
public struct RelayEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// The host it was bound to, as given (e.g. "127.0.0.1").
    public var host: String
    /// The bound TCP port (the real one when port 0 was asked for).
    public var port: Int

    /// An endpoint value (e.g. for a relay started elsewhere).
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `ws://HOST:PORT` (IPv6 hosts in brackets): the base URL clients put `/cable/…` after.
    public var url: String {
        host.contains(":") ? "ws://[\(host)]:\(port)" : "ws://\(host):\(port)"
    }

    /// The URL, as `ws://HOST:PORT`.
    public var description: String { url }
}

/// The caBLE tunnel service on loopback: a WebSocket relay that pairs a `/cable/new` connection
/// with a `/cable/connect` connection and forwards binary messages between them verbatim.
///
/// See Docs/RELAY.md for the endpoints, status codes, limits and close codes. All connections run
/// on one event loop, which serialises every tunnel's events (order preserved, no locks needed).
///
/// ```swift
/// let relay = TunnelRelay()
/// let endpoint = try await relay.start()   // ws://127.0.0.1:PORT
/// …
/// await relay.shutdown()                   // closes tunnels with 1001, stops accepting
/// ```
public final class TunnelRelay: Sendable {
    /// The limits this relay enforces.
    public let configuration: RelayConfiguration

    private enum Lifecycle {
        case idle
        case starting
        case running(server: Channel, registry: NIOLoopBound<RelayRegistry>, endpoint: RelayEndpoint)
        case stopping(EventLoopFuture<Void>)
        case stopped
    }

    private let host: String
    private let port: Int
    private let eventLoop: EventLoop
    private let logger: Logger
    private let statisticsBox = RelayStatisticsBox()
    private let lifecycle = Mutex(Lifecycle.idle)

    /// Creates a relay; nothing listens until ``start()``.
    ///
    /// - Parameters:
    ///   - configuration: limits and timeouts (defaults in ``RelayConfiguration``).
    ///   - host: a loopback address to bind (`127.0.0.1`, `::1` or `localhost`).
    ///   - port: TCP port; 0 picks a free one.
    ///   - group: where to run; the relay uses one event loop of it.
    ///   - logger: swift-log logger; tunnel IDs appear only as their first 4 hex digits.
    public init(
        configuration: RelayConfiguration = RelayConfiguration(),
        host: String = "127.0.0.1",
        port: Int = 0,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "hybrid-sim.relay")
    ) {
        self.configuration = configuration
        self.host = host
        self.port = port
        self.eventLoop = group.next()
        self.logger = logger
    }

    /// Binds the listening socket and starts accepting.
    ///
    /// - Returns: the bound endpoint (``RelayEndpoint/url`` is `ws://127.0.0.1:PORT`).
    /// - Throws: ``RuntimeError`` `.invalidAddress` for a non-loopback host, `.bindFailed`, or
    ///   `.invalidState` when called twice.
    @discardableResult
    public func start() async throws -> RelayEndpoint {
        try lifecycle.withLock { state in
            guard case .idle = state else { throw RuntimeError(.invalidState, "relay already started or shut down") }
            state = .starting
        }
        do {
            let running = try await bind()
            lifecycle.withLock { $0 = .running(server: running.0, registry: running.1, endpoint: running.2) }
            logger.info("relay listening on \(running.2.url)")
            return running.2
        } catch {
            lifecycle.withLock { $0 = .idle }
            throw error
        }
    }

    private func bind() async throws -> (Channel, NIOLoopBound<RelayRegistry>, RelayEndpoint) {
        guard LoopbackAddress.isLoopback(host) else {
            throw RuntimeError(
                .invalidAddress,
                "relay host \(host) is not a loopback address; the relay binds loopback only"
            )
        }
        let loop = eventLoop
        let (configuration, statistics, logger) = (self.configuration, statisticsBox, self.logger)
        let registry = try await loop.submit {
            NIOLoopBound(
                RelayRegistry(
                    eventLoop: loop,
                    configuration: configuration,
                    statistics: statistics,
                    logger: logger
                ),
                eventLoop: loop
            )
        }.get()
        let bootstrap = ServerBootstrap(group: loop)
            .serverChannelOption(.backlog, value: 512)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try RelayConnection.configure(channel, registry: registry.value)
                }
            }
        let server: Channel
        do {
            server = try await bootstrap.bind(host: host, port: port).get()
        } catch let error as IOError {
            let reason = String(cString: strerror(error.errnoCode)).lowercased()
            throw RuntimeError(.bindFailed, "relay could not bind \(host):\(port): \(reason)")
        } catch {
            throw RuntimeError(.bindFailed, "relay could not bind \(host):\(port): \(error)")
        }
        guard let boundPort = server.localAddress?.port else {
            try? await server.close().get()
            throw RuntimeError(.bindFailed, "relay socket has no local port")
        }
        return (server, registry, RelayEndpoint(host: host, port: boundPort))
    }

    /// Stops accepting, closes every tunnel with 1001 (going away) and waits until every
    /// connection is closed (at most the close-handshake timeout plus half a second). Idempotent;
    /// concurrent callers all wait for the same shutdown.
    public func shutdown() async {
        enum Step {
            case run(Channel, NIOLoopBound<RelayRegistry>)
            case wait(EventLoopFuture<Void>)
            case done
        }
        let promise = eventLoop.makePromise(of: Void.self)
        let step: Step = lifecycle.withLock { state in
            switch state {
            case .idle, .starting, .stopped:
                state = .stopped
                return .done
            case .stopping(let future):
                return .wait(future)
            case .running(let server, let registry, _):
                state = .stopping(promise.futureResult)
                return .run(server, registry)
            }
        }
        switch step {
        case .done:
            promise.succeed(())
        case .wait(let future):
            promise.succeed(())
            try? await future.get()
        case .run(let server, let registry):
            logger.info("relay shutting down")
            try? await server.close().get()
            let drained = registry.eventLoop.flatSubmit { registry.value.shutdown() }
            try? await drained.get()
            lifecycle.withLock { $0 = .stopped }
            promise.succeed(())
            logger.info("relay stopped")
        }
    }

    /// Where the relay listens, once started.
    public var endpoint: RelayEndpoint? {
        lifecycle.withLock { state in
            if case .running(_, _, let endpoint) = state { return endpoint }
            return nil
        }
    }

    /// A snapshot of the relay's counters.
    public var statistics: RelayStatistics { statisticsBox.value }

    /// Tunnels currently open (registered and not yet closed); 0 after every tunnel ended.
    public var openTunnelCount: Int { statisticsBox.value.openTunnels }
}

/// Recognises loopback host names and addresses.
enum LoopbackAddress {
    /// Whether `host` is `localhost`, `::1` or in 127.0.0.0/8.
    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in UInt8(part) != nil }
    }
}
