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
/// See Docs/RELAY.md for the endpoints, status codes, limits and close codes. The relay runs a shard
/// per event loop of its group (``RelayConfiguration/eventLoops``): each shard's `RelayRegistry`
/// owns its tunnels, and `RelayDispatcher` accepts every connection and hands it to the loop of
/// the shard that owns its tunnel, so a tunnel's events are serialised on one loop (order
/// preserved, no locks, no thread hop per message). A relay with a single shard has nothing to
/// route: it accepts on that shard's loop (`RelayLoopAcceptor`), with no dispatcher thread.
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
        case running(acceptor: Acceptor, shards: RelayShards, endpoint: RelayEndpoint)
        case stopping(EventLoopFuture<Void>)
        case stopped
    }

    /// What accepts the relay's connections.
    private enum Acceptor: Sendable {
        /// Several shards: a thread that routes each connection to its shard's loop.
        case dispatcher(RelayDispatcher)
        /// One shard: the listening socket is a channel on that shard's loop.
        case shardLoop(RelayLoopAcceptor)

        /// Stops accepting; returns once no connection can reach a shard any more.
        func stop() async {
            switch self {
            case .dispatcher(let dispatcher): await dispatcher.stop()
            case .shardLoop(let acceptor): await acceptor.stop()
            }
        }
    }

    private let host: String
    private let port: Int
    private let eventLoops: [EventLoop]
    private let logger: Logger
    private let statisticsBox = RelayStatisticsBox()
    private let lifecycle = Mutex(Lifecycle.idle)
    /// Saves the contact memory (``RelayConfiguration/contactPersistence``), if any.
    private let contactSaver: ContactSaver?
    private let contactSaveFailure = Mutex<String?>(nil)

    /// After ``shutdown()``: why the contact memory (``RelayConfiguration/contactPersistence``) is
    /// not saved (its last save failed, or did not finish within 5 s); `nil` when it is, or when
    /// there is none to save.
    public var contactSaveProblem: String? { contactSaveFailure.withLock { $0 } }

    /// Creates a relay; nothing listens until ``start()``.
    ///
    /// - Parameters:
    ///   - configuration: limits and timeouts (defaults in ``RelayConfiguration``).
    ///   - host: a loopback address to bind (`127.0.0.1`, `::1` or `localhost`).
    ///   - port: TCP port; 0 picks a free one.
    ///   - group: where to run; the relay uses ``RelayConfiguration/eventLoops`` of its loops (all
    ///     of them by default), one shard each.
    ///   - logger: swift-log logger; tunnel IDs appear only as their first 4 hex digits.
    public init(
        configuration: RelayConfiguration = RelayConfiguration(),
        host: String = "127.0.0.1",
        port: Int = 0,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "hybrid-sim.relay")
    ) {
        self.configuration = configuration
        self.contactSaver = configuration.contactPersistence.map { ContactSaver($0, logger: logger) }
        self.host = LoopbackAddress.unbracketed(host)
        self.port = port
        var loops = Array(group.makeIterator())
        if loops.isEmpty { loops = [group.next()] }
        if configuration.eventLoops > 0 { loops = Array(loops.prefix(configuration.eventLoops)) }
        self.eventLoops = loops
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
            lifecycle.withLock { $0 = .running(acceptor: running.0, shards: running.1, endpoint: running.2) }
            logger.info("relay listening on \(running.2.url)")
            return running.2
        } catch {
            lifecycle.withLock { $0 = .idle }
            throw error
        }
    }

    private func bind() async throws -> (Acceptor, RelayShards, RelayEndpoint) {
        guard LoopbackAddress.isLoopback(host) else {
            // A host with a port in it (one colon: not an IPv6 address) is a common slip.
            let parts = host.split(separator: ":", omittingEmptySubsequences: false)
            if parts.count == 2, LoopbackAddress.isLoopback(String(parts[0])), Int(parts[1]) != nil {
                throw RuntimeError(
                    .invalidAddress, "relay host \(host) carries a port: give the host alone (\(parts[0])) and the port with --port")
            }
            throw RuntimeError(
                .invalidAddress,
                "relay host \(host) is not a loopback address (127.x.y.z written in full, ::1 or localhost); the relay binds loopback only"
            )
        }
        let (configuration, statistics, logger, contactSaver) = (self.configuration, statisticsBox, self.logger, self.contactSaver)
        var registries: [NIOLoopBound<RelayRegistry>] = []
        let admissionCounts = AdmissionCounts()
        for (index, loop) in eventLoops.enumerated() {
            let count = eventLoops.count
            registries.append(
                try await loop.submit {
                    NIOLoopBound(
                        RelayRegistry(
                            eventLoop: loop,
                            configuration: configuration,
                            statistics: statistics,
                            logger: logger,
                            shardIndex: index,
                            shardCount: count,
                            admissionCounts: admissionCounts,
                            contactSaver: index == RelayShards.directoryShard ? contactSaver : nil
                        ),
                        eventLoop: loop
                    )
                }.get()
            )
        }
        let acceptFailures = AcceptFailures { line in
            switch line {
            case .paused(let text): logger.warning("\(text)")
            case .resumed(let text): logger.info("\(text)")
            }
        }
        let shards = RelayShards(
            registries: registries, configuration: configuration, statistics: statistics, admissionCounts: admissionCounts,
            acceptFailures: acceptFailures)
        if registries.count == 1 {
            let (acceptor, boundPort) = try await RelayLoopAcceptor.listen(host: host, port: port, shards: shards)
            return (.shardLoop(acceptor), shards, RelayEndpoint(host: host, port: boundPort))
        }
        let (dispatcher, boundPort) = try RelayDispatcher.listen(host: host, port: port, shards: shards)
        dispatcher.start()
        return (.dispatcher(dispatcher), shards, RelayEndpoint(host: host, port: boundPort))
    }

    /// Stops accepting, closes every tunnel with 1001 (going away) and waits until every
    /// connection is closed (at most the close-handshake timeout plus half a second). Idempotent;
    /// concurrent callers all wait for the same shutdown.
    public func shutdown() async {
        enum Step {
            case run(Acceptor, RelayShards)
            case wait(EventLoopFuture<Void>)
            case done
        }
        let promise = eventLoops[0].makePromise(of: Void.self)
        let step: Step = lifecycle.withLock { state in
            switch state {
            case .idle, .starting, .stopped:
                state = .stopped
                return .done
            case .stopping(let future):
                return .wait(future)
            case .running(let acceptor, let shards, _):
                state = .stopping(promise.futureResult)
                return .run(acceptor, shards)
            }
        }
        switch step {
        case .done:
            promise.succeed(())
        case .wait(let future):
            promise.succeed(())
            try? await future.get()
        case .run(let acceptor, let shards):
            logger.info("relay shutting down")
            await acceptor.stop()
            let drained = shards.registries.map { registry in
                registry.eventLoop.flatSubmit { registry.value.shutdown() }
            }
            for shard in drained { try? await shard.get() }
            // The directory handed its last change over while shutting down.
            if let contactSaver {
                let problem = await contactSaver.flush()
                contactSaveFailure.withLock { $0 = problem }
                if let problem { logger.error("the relay's contact memory is not saved: \(problem)") }
            }
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

    /// The relay-wide admission counts (tests read the unjoined tunnels per source); `nil` when not running.
    var admissionCountsForTests: AdmissionCounts? {
        lifecycle.withLock { state in
            if case .running(_, let shards, _) = state { return shards.admissionCounts }
            return nil
        }
    }

    /// How often the accepting thread peeked at a pending connection's request line (0 when not
    /// running, or with one shard: no dispatcher); see `RelayDispatcher.peekCount`.
    package var dispatcherPeekCount: Int {
        lifecycle.withLock { state in
            if case .running(.dispatcher(let dispatcher), _, _) = state {
                return dispatcher.peekCount.load(ordering: .relaxed)
            }
            return 0
        }
    }

    /// Whether the relay accepts through ``RelayDispatcher``'s thread (several shards) rather than
    /// on its single shard's loop; `nil` when not running.
    package var acceptsThroughDispatcher: Bool? {
        lifecycle.withLock { state in
            guard case .running(let acceptor, _, _) = state else { return nil }
            if case .dispatcher = acceptor { return true }
            return false
        }
    }
}

/// Recognises loopback host names and addresses.
package enum LoopbackAddress {
    /// Whether `host` is `localhost` (any case: host names are), `::1` (or `[::1]`, as a URL
    /// writes it) or in 127.0.0.0/8.
    package static func isLoopback(_ host: String) -> Bool {
        let host = unbracketed(host)
        if host.lowercased() == "localhost" || host == "::1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in UInt8(part) != nil }
    }

    /// Why `host`, a number but not four decimal numbers without leading zeros (`127.0.0.010`,
    /// `127.1`, `2130706433`, `0x7f.0.0.1`), is refused; `nil` for anything else. The resolver reads
    /// such forms as `inet_aton` does (a leading 0 is octal: `127.0.0.010` is 127.0.0.8), so the
    /// program would connect somewhere other than the address written.
    package static func nonCanonicalIPv4(_ host: String) -> String? {
        guard let first = host.first, first.isASCII, first.isNumber,
            host.allSatisfy({ $0.isASCII && ($0.isHexDigit || $0 == "." || $0 == "x" || $0 == "X") })
        else { return nil }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        let canonical = parts.count == 4 && parts.allSatisfy { part in
            guard let value = UInt8(part), part.allSatisfy(\.isASCII) else { return false }
            return String(value) == part
        }
        if canonical { return nil }
        let decimal = parts.count == 4 ? parts.compactMap { UInt8($0).map(String.init) } : []
        let advice = decimal.count == 4 ? "; for decimal, write \(decimal.joined(separator: "."))" : ""
        return "\(host) is not an IPv4 address in dotted decimal (four numbers 0-255 without leading zeros; "
            + "the resolver would read a leading 0 as octal, or fill in missing parts\(advice))"
    }

    /// `host` without the brackets a URL puts around an IPv6 address (`[::1]` is `::1`), as
    /// sockets and the resolver take it.
    package static func unbracketed(_ host: String) -> String {
        host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }
}
