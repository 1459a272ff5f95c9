#if canImport(Glibc)
import CHybridLinux
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CTAP2
import HybridCore
import NIOCore
import NIOPosix
import Synchronization

/// Accepts the TCP connections of a relay with several shards and hands each one to the event loop
/// of the shard that owns what it asks for, so both peers of a tunnel run on the same loop and a
/// tunnel never needs a lock or a thread hop per message. (A relay with one shard accepts on that
/// shard's loop instead: ``RelayLoopAcceptor``.)
///
/// A connection is accepted on the dispatcher's own thread once its first bytes arrived (Linux:
/// `TCP_DEFER_ACCEPT`, ``RelayLoopAcceptor/deferAcceptSeconds``) and held (not read) until the start of
/// its request line is in the socket; the dispatcher *peeks* at it (`MSG_PEEK`: the bytes stay for
/// the HTTP parser) and picks the shard:
/// - `GET /cable/new/{tunnel ID}`: the shard the tunnel ID names (``RelayShards/shard(ofTunnelID:count:)``);
/// - `GET /cable/connect/{routing ID}/…`: the shard the routing ID names (``RelayShards/shard(of:count:)``);
/// - `GET /cable/listen/…` and `GET /cable/contact/…`: shard 0, which holds the linked-phone
///   directory and the tunnels of contact requests;
/// - anything else (refusals, garbage): the next shard, round-robin.
///
/// Then the socket becomes a NIO channel on that shard's loop (`ClientBootstrap.withConnectedSocket`)
/// and ``RelayConnection/configure(_:registry:counted:)`` sets up its pipeline: that is the one hop of
/// a connection, at connect time. A connection that sends nothing routable within
/// ``RelayConfiguration/upgradeTimeout`` is closed (after a `408` if it sent part of its request
/// line), like a connection that does not finish its request in time. Connections beyond ``RelayConfiguration/maxConnections`` (counted from accept)
/// are handed over at once and answered 503 there, unread.
package final class RelayDispatcher: Sendable {
    /// How many bytes of a request the dispatcher looks at: enough for `GET /cable/connect/RRRRRR`
    /// (26) after up to 8 bytes of empty lines, which NIO's parser skips and ``route(_:shardCount:)`` too.
    package static let peekLength = 34

    private let listener: CInt
    private let shards: RelayShards
    private let stopping = Atomic<Bool>(false)
    private let thread = NIOThreadPool(numberOfThreads: 1)
    private let finished: EventLoopPromise<Void>
    /// What the thread waits on; locked once, by the thread, for as long as it runs.
    private let readiness: Mutex<DispatcherReadiness>
    private let shardCount: Int
    /// How often the thread looked at a pending connection's first bytes (`MSG_PEEK`) since start:
    /// tests bound it to show that a dribbling client does not make the thread spin.
    package let peekCount = Atomic<Int>(0)

    /// Binds and listens on `host:port`; the thread starts with ``start()``.
    ///
    /// - Returns: the dispatcher and the bound port.
    /// - Throws: ``RuntimeError`` `.bindFailed` with the system's reason.
    static func listen(host: String, port: Int, shards: RelayShards) throws -> (RelayDispatcher, Int) {
        let address: SocketAddress
        do {
            address = try SocketAddress.makeAddressResolvingHost(host, port: port)
        } catch {
            throw RuntimeError(.bindFailed, "relay could not bind \(host):\(port): \(RuntimeError.systemReason(error))")
        }
        let family = address.protocol == .inet6 ? AF_INET6 : AF_INET
        #if canImport(Glibc)
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(family, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw bindError(host, port) }
        var one: CInt = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<CInt>.size))
        #if os(Linux)
        // Best effort, as on the one-shard path (RelayLoopAcceptor.deferAcceptSeconds).
        var deferSeconds = RelayLoopAcceptor.deferAcceptSeconds
        _ = setsockopt(fd, CInt(IPPROTO_TCP), TCP_DEFER_ACCEPT, &deferSeconds, socklen_t(MemoryLayout<CInt>.size))
        #endif
        let bound = address.withSockAddr { pointer, length in bind(fd, pointer, socklen_t(length)) }
        guard bound == 0, Glibc.listen(fd, 512) == 0 else {
            let error = bindError(host, port)
            close(fd)
            throw error
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else {
            close(fd)
            throw RuntimeError(.bindFailed, "relay socket has no local port")
        }
        let boundPort: UInt16 = withUnsafePointer(to: &storage) { pointer in
            if family == AF_INET6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
        let readiness: DispatcherReadiness
        do {
            readiness = try DispatcherReadiness(listener: fd)
        } catch {
            close(fd)
            throw RuntimeError(
                .bindFailed, "relay could not set up its accepting thread: \(RuntimeError.systemReason(errno: error.errno))")
        }
        return (RelayDispatcher(listener: fd, readiness: readiness, shards: shards), Int(boundPort))
    }

    private static func bindError(_ host: String, _ port: Int) -> RuntimeError {
        let code = errno
        var failure = RuntimeError(.bindFailed, "relay could not bind \(host):\(port): \(BindConflict.reason(errno: code, host: host, port: port))")
        failure.systemErrno = code
        return failure
    }

    private init(listener: CInt, readiness: consuming DispatcherReadiness, shards: RelayShards) {
        self.listener = listener
        self.readiness = Mutex(readiness)
        self.shards = shards
        self.finished = shards.registries[0].eventLoop.makePromise(of: Void.self)
        self.shardCount = shards.registries.count
    }

    /// A bootstrap that turns an accepted socket into a channel on `shard`'s loop. `counted`: the
    /// connection was counted against ``RelayConfiguration/maxConnections`` (otherwise `admission`
    /// is a refusal: ``DispatcherAdmission/overCapacity`` or ``DispatcherAdmission/refused(_:)``).
    private func bootstrap(shard: Int, counted: Bool, admission: DispatcherAdmission?) -> ClientBootstrap {
        let registry = shards.registries[shard]
        return ClientBootstrap(group: registry.eventLoop)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelOption(.recvAllocator, value: RelayShards.receiveAllocator)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try RelayConnection.configure(channel, registry: registry.value, counted: counted, admission: admission)
                }
            }
    }

    /// Starts the accepting thread.
    func start() {
        thread.start()
        thread.submit { [self] _ in self.run() }
    }

    /// Stops accepting, closes the listening socket and every connection not handed over yet, and
    /// returns once the thread has stopped.
    func stop() async {
        stopping.store(true, ordering: .relaxed)
        try? await finished.futureResult.get()
        try? await thread.shutdownGracefully()
    }

    // MARK: - The accepting thread

    private struct Pending {
        var deadline: NIODeadline
        /// The peer's IP address (the per-source caps count the connection under it).
        var source: String?
        /// Whether the readiness set holds the descriptor (armed, or reported and disarmed).
        var watched = false
        /// How often only part of the prefix was there: the recheck backs off (2 ms doubling to
        /// 256 ms), so a client that dribbles its request line cannot make the thread spin.
        var partialLooks = 0
    }

    /// The accepting thread's state: the connections accepted and not handed over yet.
    private struct Backlog {
        var pending: [CInt: Pending] = [:]
        /// Every connection gets the same upgrade timeout, so accept order is deadline order. An
        /// entry names its connection by descriptor and deadline: a descriptor handed over, closed,
        /// and given to a later connection (with a later deadline) does not match.
        var expiries = DeadlineFIFO<(fd: CInt, deadline: NIODeadline)>()
        /// Connections of which only part of the routable prefix arrived: looked at again at this
        /// time instead of being watched (the socket would be reported readable again and again).
        var rechecks: [CInt: NIODeadline] = [:]
        var nextShard = 0
    }

    private func run() {
        readiness.withLock { readiness in
            var backlog = Backlog()
            var peek = [UInt8](repeating: 0, count: Self.peekLength)
            var ready: [CInt] = []
            let timeout = TimeAmount(shards.configuration.upgradeTimeout)
            /// Set after `accept` failed for want of descriptors: the listener stays readable, so
            /// it is left out of the wait for a moment instead of spinning.
            var acceptPausedUntil: NIODeadline?
            while !stopping.load(ordering: .relaxed) {
                let now = NIODeadline.now()
                var wait = TimeAmount.milliseconds(50)
                if let paused = acceptPausedUntil {
                    if paused > now {
                        wait = min(wait, paused - now)
                    } else {
                        acceptPausedUntil = nil
                        readiness.watchListener(true)
                    }
                }
                if let next = backlog.expiries.nextDeadline { wait = min(wait, max(.zero, next - now)) }
                for due in backlog.rechecks.values { wait = min(wait, max(.zero, due - now)) }
                let waitMilliseconds = Int32(max(0, (wait.nanoseconds + 999_999) / 1_000_000))
                let listenerReady = readiness.wait(milliseconds: waitMilliseconds, ready: &ready)
                let after = NIODeadline.now()
                for (fd, due) in backlog.rechecks where due <= after {
                    backlog.rechecks[fd] = nil
                    ready.append(fd)
                }
                if listenerReady {
                    // Most clients send their request with the connect: look at it at once.
                    ready += acceptAll(into: &backlog, deadline: after + timeout, pausedUntil: &acceptPausedUntil)
                    if acceptPausedUntil != nil { readiness.watchListener(false) }
                }
                for fd in ready {
                    look(at: fd, backlog: &backlog, readiness: &readiness, peek: &peek, now: after)
                }
                for expired in backlog.expiries.popDue(at: after) {
                    guard let state = backlog.pending[expired.fd], state.deadline == expired.deadline else { continue }
                    backlog.pending[expired.fd] = nil
                    backlog.rechecks[expired.fd] = nil
                    readiness.forget(expired.fd)
                    if state.partialLooks > 0 {
                        let rejection = RelayRejection.requestTimeout(after: shards.configuration.upgradeTimeout)
                        answer(expired.fd, with: rejection)
                        // Counted and logged as a shard's refusal is; the log limiter lives on shard 0's loop.
                        let shard = shards.registries[0]
                        shard.eventLoop.execute { shard.value.recordRejected(rejection) }
                    }
                    drop(expired.fd, source: state.source)
                }
                // So the queue holds about as many entries as connections pending.
                let pending = backlog.pending
                backlog.expiries.dropSettled { pending[$0.fd]?.deadline != $0.deadline }
            }
            close(listener)
            for (fd, state) in backlog.pending {
                readiness.forget(fd)
                // One that began its request gets the shards' answer to a request in HTTP at
                // shutdown rather than a reset; a silent one is closed (RelayRequestHandler.ShuttingDown).
                var first: UInt8 = 0
                if recv(fd, &first, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) == 1 {
                    answer(fd, with: RelayRejection(status: .serviceUnavailable, reason: "relay shutting down"))
                }
                drop(fd, source: state.source)
            }
        }
        finished.succeed(())
    }

    /// Peeks at the start of a pending connection's request and hands it to its shard, watches it
    /// until its request arrives, looks again later (a partial prefix), or drops it (closed, failed).
    private func look(
        at fd: CInt, backlog: inout Backlog, readiness: inout DispatcherReadiness, peek: inout [UInt8], now: NIODeadline
    ) {
        guard let state = backlog.pending[fd] else { return }
        let count = recv(fd, &peek, Self.peekLength, Int32(MSG_PEEK | MSG_DONTWAIT))
        peekCount.add(1, ordering: .relaxed)
        if count <= 0 {
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                if readiness.watch(fd, added: state.watched) {
                    backlog.pending[fd]?.watched = true
                } else {
                    backlog.pending[fd] = nil
                    drop(fd, source: state.source)
                }
                return
            }
            backlog.pending[fd] = nil
            readiness.forget(fd)
            drop(fd, source: state.source)
            return
        }
        let shard: Int
        switch Self.route(peek[0..<count], shardCount: shardCount) {
        case .needMore where count == Self.peekLength:
            // All it will ever see and still undecided (more empty lines than the window holds):
            // any shard, which answers it (linked-phone requests there get their 400).
            shard = backlog.nextShard
            backlog.nextShard = (backlog.nextShard + 1) % shardCount
        case .needMore:
            let looks = min(state.partialLooks, 7)
            backlog.pending[fd]?.partialLooks = looks + 1
            backlog.rechecks[fd] = now + .milliseconds(2 << Int64(looks))
            return
        case .shard(let index):
            shard = index
        case .any:
            shard = backlog.nextShard
            backlog.nextShard = (backlog.nextShard + 1) % shardCount
        }
        backlog.pending[fd] = nil
        readiness.forget(fd)
        handOver(fd, to: shard, admission: .admitted(source: state.source))
    }

    /// Accepts every waiting connection; returns those now pending (to be looked at).
    private func acceptAll(into backlog: inout Backlog, deadline: NIODeadline, pausedUntil: inout NIODeadline?) -> [CInt] {
        var accepted: [CInt] = []
        while true {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                    #if os(Linux)
                    accept4(listener, address, &length, Int32(SOCK_CLOEXEC.rawValue))
                    #else
                    accept(listener, address, &length)
                    #endif
                }
            }
            guard fd >= 0 else {
                let code = errno
                if AcceptFailures.pauses(errno: code) {
                    pausedUntil = .now() + RelayLoopAcceptor.acceptBackoff
                    shards.acceptFailures.failed(errno: code)
                }
                return accepted
            }
            shards.acceptFailures.accepted()
            #if !os(Linux)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            #endif
            // NIO makes the socket non-blocking when it takes it; the peek does not block either.
            if shards.connectionAccepted() {
                // The pending-upgrade and per-source caps count from here, so a connection held
                // here (silent, or dribbling its request line) counts as awaiting its upgrade.
                let source = Self.ipAddress(storage)
                if let refusal = shards.admissionCounts.admit(
                    source: source, maxPending: shards.configuration.maxPendingUpgrades,
                    maxPerSource: shards.configuration.maxConnectionsPerSource)
                {
                    handOver(fd, to: backlog.nextShard, admission: .refused(refusal))
                    backlog.nextShard = (backlog.nextShard + 1) % shardCount
                } else {
                    backlog.pending[fd] = Pending(deadline: deadline, source: source)
                    backlog.expiries.append((fd, deadline), deadline: deadline)
                    accepted.append(fd)
                }
            } else {
                // Over the connection cap: answered 503 on any loop, unread (never served there).
                bootstrap(shard: backlog.nextShard, counted: false, admission: .overCapacity).withConnectedSocket(fd).whenFailure { _ in }
                backlog.nextShard = (backlog.nextShard + 1) % shardCount
            }
        }
    }

    /// Answers `rejection` on a connection never handed over: `408` for one that sent only part of
    /// its request line before its upgrade timeout (as a shard answers one cut short later in its
    /// request), `503` for one caught so at shutdown. What it sent is read first: closing a socket
    /// with unread bytes resets the connection, which can discard the answer before the client
    /// reads it. Best effort, never blocking: the socket is non-blocking.
    private func answer(_ fd: CInt, with rejection: RelayRejection) {
        // Bounded: a client that keeps sending is not read forever (its close may then reset).
        var unread = [UInt8](repeating: 0, count: 4096)
        var reads = 0
        while reads < 16, recv(fd, &unread, unread.count, Int32(MSG_DONTWAIT)) == unread.count { reads += 1 }
        let response = Array(rejection.response.utf8)
        #if os(Linux)
        let flags = Int32(MSG_DONTWAIT | MSG_NOSIGNAL)
        #else
        let flags = Int32(MSG_DONTWAIT)
        #endif
        _ = send(fd, response, response.count, flags)
    }

    /// Closes a connection that was never handed over.
    private func drop(_ fd: CInt, source: String?) {
        close(fd)
        shards.admissionCounts.closed(source: source, wasPending: true)
        shards.connectionDropped()
        // The last connections of an attack are often silent ones that never reached a shard: an
        // idle relay still hands its freed memory back (IdleMemoryTrim).
        if shards.statistics.openConnectionCount == 0 {
            let shard = shards.registries[0]
            shard.eventLoop.execute { [statistics = shards.statistics] in
                shard.value.admission.idleTrim.connectionClosed(on: shard.eventLoop) { statistics.openConnectionCount }
            }
        }
    }

    private func handOver(_ fd: CInt, to shard: Int, admission: DispatcherAdmission) {
        bootstrap(shard: shard, counted: true, admission: admission).withConnectedSocket(fd).whenFailure { [shards] _ in
            // NIO closes the descriptor of a socket it could not register.
            if case .admitted(let source) = admission {
                shards.admissionCounts.closed(source: source, wasPending: true)
            }
            shards.connectionDropped()
        }
    }

    // MARK: - Routing

    /// Where a connection goes, from the first bytes of its request.
    package enum Route: Equatable, Sendable {
        /// The prefix so far could still be a routable request: wait for more bytes.
        case needMore
        /// To the shard of this index.
        case shard(Int)
        /// To any shard.
        case any
    }

    private static let connectPrefix = Array("GET /cable/connect/".utf8)
    private static let newPrefix = Array("GET /cable/new/".utf8)
    private static let directoryPrefixes = [Array("GET /cable/listen/".utf8), Array("GET /cable/contact/".utf8)]

    /// The shard for a request that starts with `bytes` (see the type's documentation).
    package static func route(_ bytes: ArraySlice<UInt8>, shardCount: Int) -> Route {
        guard shardCount > 1 else { return .any }
        // NIO's parser skips empty lines before a request line, so they are skipped here too: else
        // "\r\nGET /cable/listen/…" reached a shard without the linked-phone directory.
        let bytes = bytes.drop { $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\n") }
        guard !bytes.isEmpty else { return .needMore }
        let hexLength = 2 * HybridConstants.routingIDSize
        if bytes.starts(with: connectPrefix) {
            let hex = bytes.dropFirst(connectPrefix.count).prefix(hexLength)
            guard hex.count == hexLength else { return .needMore }
            guard let routingID = Hex.decode(String(decoding: hex, as: UTF8.self), byteCount: HybridConstants.routingIDSize)
            else { return .any }
            return .shard(RelayShards.shard(of: routingID, count: shardCount))
        }
        if bytes.starts(with: newPrefix) {
            let hex = bytes.dropFirst(newPrefix.count).prefix(2)
            guard hex.count == 2 else { return .needMore }
            guard let first = Hex.decode(String(decoding: hex, as: UTF8.self), byteCount: 1) else { return .any }
            return .shard(RelayShards.shard(ofTunnelID: first, count: shardCount))
        }
        for prefix in directoryPrefixes where bytes.starts(with: prefix) {
            return .shard(RelayShards.directoryShard)
        }
        let candidates = [connectPrefix, newPrefix] + directoryPrefixes
        if candidates.contains(where: { $0.starts(with: bytes) }) { return .needMore }
        return .any
    }
}

extension RelayDispatcher {
    /// The IP address in `storage` (the peer address `accept` returned; `nil` if it is neither
    /// IPv4 nor IPv6), written by NIO's `SocketAddress` exactly as `Channel.remoteAddress?.ipAddress`
    /// writes it, so the dispatcher and the shards count a source under the same string.
    static func ipAddress(_ storage: sockaddr_storage) -> String? {
        let family = Int32(storage.ss_family)
        return withUnsafePointer(to: storage) { pointer -> SocketAddress? in
            switch family {
            case AF_INET: return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { SocketAddress($0.pointee) }
            case AF_INET6: return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { SocketAddress($0.pointee) }
            default: return nil
            }
        }?.ipAddress
    }
}

/// What the dispatcher decided about a connection's admission before handing it to a shard.
enum DispatcherAdmission: Sendable {
    /// Counted as awaiting its upgrade under `source` (``AdmissionCounts``).
    case admitted(source: String?)
    /// Refused by a pending-upgrade or per-source cap: answered with its fixed response, unread.
    case refused(AdmissionRefusal)
    /// Past ``RelayConfiguration/maxConnections`` when it was accepted: answered 503, unread, even
    /// if a connection has closed since. Its request was never looked at, so the shard it went to
    /// is the next in turn, not the one that owns what it asks for: served there, a `/cable/connect`
    /// would find no tunnel (404), a `/cable/new` would miss a tunnel ID open on another shard (a
    /// second tunnel, not 409), and `/cable/listen` would miss the directory (shard 0).
    case overCapacity
}
