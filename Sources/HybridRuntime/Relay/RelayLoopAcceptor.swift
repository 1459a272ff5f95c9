#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore
import NIOPosix

/// Accepts the connections of a relay that has exactly one shard on that shard's own event loop
/// (a NIO `ServerBootstrap` on it), instead of through ``RelayDispatcher``'s thread.
///
/// With one shard there is nothing to route, so the dispatcher's peek and hand-over would only add a
/// thread wake-up and a cross-thread hop to every connection: on a relay that shares its loop with
/// its clients (`hybrid-sim bench --loops one`) that is on a sign-in's critical path twice. Here the
/// listening socket is one more channel of the loop and an accepted connection goes straight to
/// ``RelayConnection/configure(_:registry:counted:admission:)`` with `counted: false` and
/// `admission: nil`, so the registry decides every accept-time limit itself, as it does for a
/// connection the dispatcher hands over:
/// - ``RelayConfiguration/maxConnections``: counted by the registry, 503 beyond it, unread;
/// - ``RelayConfiguration/maxPendingUpgrades`` and ``RelayConfiguration/maxConnectionsPerSource``:
///   counted by the shard's `AdmissionLedger` from the accept (a silent connection counts as
///   awaiting its upgrade), 503 / 429 beyond them, unread;
/// - shutting down: the listener is closed first, and a connection accepted meanwhile is closed by
///   the registry;
/// - a connection that does not finish its request within ``RelayConfiguration/upgradeTimeout`` is
///   closed by its upgrade timer, after a `408` if its request had begun (the dispatcher does the
///   same with one that sent nothing routable in that time).
///
/// When `accept` fails (no descriptors left, no memory), NIO's `AcceptBackoffHandler` stops
/// accepting for ``acceptBackoff``, as the dispatcher pauses, instead of spinning on a listener that
/// stays readable; ``AcceptFailures`` logs the episode (a warning at its start, a line at its end).
final class RelayLoopAcceptor: Sendable {
    /// How long accepting pauses after `accept` failed (the dispatcher's pause too).
    static let acceptBackoff = AcceptFailures.backoff
    /// The listen backlog (the dispatcher's too).
    static let backlog: Int32 = 512
    /// `TCP_DEFER_ACCEPT` on the listening socket (Linux; the dispatcher's too): the kernel hands a
    /// connection over only once its first bytes arrived, so a connection costs one wake-up and one
    /// look at its request instead of a wait for them. A connection that sends nothing is handed
    /// over after this long (the kernel's next SYN-ACK), and its upgrade timeout and the caps count
    /// it from then; until then it holds no descriptor, only a place in the kernel's queue of
    /// half-open connections (nginx's `deferred`, HAProxy's `defer-accept`). Best effort: where the
    /// system refuses the option, connections are accepted at once, as before.
    static let deferAcceptSeconds: CInt = 1

    /// Sets ``deferAcceptSeconds`` on a listening socket; does nothing off Linux or if refused.
    static func deferAccept(on listener: Channel) {
        #if os(Linux)
        let option = ChannelOptions.Types.SocketOption(level: .tcp, name: NIOBSDSocket.Option(rawValue: TCP_DEFER_ACCEPT))
        try? listener.syncOptions?.setOption(option, value: ChannelOptions.Types.SocketOption.Value(deferAcceptSeconds))
        #endif
    }

    private let listener: Channel

    private init(listener: Channel) {
        self.listener = listener
    }

    /// Binds `host:port` on the loop of the single shard of `shards` and starts accepting.
    ///
    /// - Returns: the acceptor and the bound port.
    /// - Throws: ``RuntimeError`` `.bindFailed` with the system's reason.
    static func listen(host: String, port: Int, shards: RelayShards) async throws -> (RelayLoopAcceptor, Int) {
        precondition(shards.registries.count == 1, "accepting on the shard's loop needs exactly one shard")
        let registry = shards.registries[0]
        let bootstrap = ServerBootstrap(group: registry.eventLoop)
            .serverChannelOption(.backlog, value: backlog)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // Before the bind and listen, which come after the initializer.
                    RelayLoopAcceptor.deferAccept(on: channel)
                    try AcceptFailureHandler.install(on: channel, failures: shards.acceptFailures)
                }
            }
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelOption(.recvAllocator, value: RelayShards.receiveAllocator)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try RelayConnection.configure(channel, registry: registry.value, counted: false, admission: nil)
                }
            }
        let listener: Channel
        do {
            listener = try await bootstrap.bind(host: host, port: port).get()
        } catch {
            var failure = RuntimeError(.bindFailed, "relay could not bind \(host):\(port): \(BindConflict.reason(error, host: host, port: port))")
            failure.systemErrno = (error as? IOError)?.errnoCode
            throw failure
        }
        guard let boundPort = listener.localAddress?.port else {
            try? await listener.close()
            throw RuntimeError(.bindFailed, "relay socket has no local port")
        }
        return (RelayLoopAcceptor(listener: listener), boundPort)
    }

    /// Stops accepting: closes the listening socket (connections already accepted stay the
    /// registry's to close).
    func stop() async {
        try? await listener.close()
    }
}
