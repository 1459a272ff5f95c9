#if canImport(Glibc)
import CHybridLinux
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What ``RelayDispatcher``'s thread waits on: its listening socket and the accepted connections
/// whose request line has not arrived yet.
///
/// A connection is watched *once* (`EPOLLONESHOT`): after it was reported readable it is not
/// reported again until ``watch(_:)`` arms it anew, so a connection handed to a shard's loop (which
/// watches it from then on) never wakes the dispatcher again, and the dispatcher needs no system
/// call to stop watching it. On Linux this is an epoll set: a wait costs the same whether 2 or 500
/// connections are pending (`poll` looked at every pending socket on every wait, which was a tenth
/// of the relay's cost of opening a tunnel under load; Docs/BENCHMARKS.md). Elsewhere it is
/// `poll` over the armed descriptors, with the same one-shot behaviour.
///
/// Owned by the dispatcher's thread; not thread-safe.
struct DispatcherReadiness: ~Copyable {
    private let listener: CInt
    private var listening = true
    #if os(Linux)
    private let epoll: CInt
    private var events = [epoll_event](repeating: epoll_event(), count: 64)
    #else
    private var armed: Set<CInt> = []
    #endif

    /// Watches `listener` for connections to accept.
    ///
    /// - Throws: the system's `errno` when the set cannot be made (no descriptors left).
    init(listener: CInt) throws(DispatcherReadinessError) {
        #if os(Linux)
        self.epoll = try Self.makeSet(listener: listener)
        #endif
        self.listener = listener
    }

    #if os(Linux)
    /// An epoll set watching `listener`.
    private static func makeSet(listener: CInt) throws(DispatcherReadinessError) -> CInt {
        let epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else { throw DispatcherReadinessError(errno: errno) }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = listener
        guard epoll_ctl(epoll, EPOLL_CTL_ADD, listener, &event) == 0 else {
            let code = errno
            close(epoll)
            throw DispatcherReadinessError(errno: code)
        }
        return epoll
    }
    #endif

    deinit {
        #if os(Linux)
        close(epoll)
        #endif
    }

    /// Stops or resumes reporting the listener (accepting pauses when the process is out of
    /// descriptors, since the listener then stays readable).
    mutating func watchListener(_ on: Bool) {
        guard on != listening else { return }
        listening = on
        #if os(Linux)
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = listener
        _ = epoll_ctl(epoll, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, listener, &event)
        #endif
    }

    /// Reports `connection` once when it becomes readable. `added`: the set already held it
    /// (it was reported before, or armed): re-arm it instead of adding it.
    ///
    /// - Returns: whether the connection is watched (`false` only if the system refused it).
    mutating func watch(_ connection: CInt, added: Bool) -> Bool {
        #if os(Linux)
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLONESHOT.rawValue | EPOLLRDHUP.rawValue
        event.data.fd = connection
        return epoll_ctl(epoll, added ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, connection, &event) == 0
        #else
        armed.insert(connection)
        return true
        #endif
    }

    /// Forgets `connection` before it is closed or handed over without having been reported
    /// (a closed descriptor leaves an epoll set by itself; this keeps the `poll` fallback exact).
    mutating func forget(_ connection: CInt) {
        #if !os(Linux)
        armed.remove(connection)
        #endif
    }

    /// Waits up to `milliseconds` (at once with 0). Puts the armed connections that became
    /// readable into `ready` (each is disarmed) and returns whether the listener has connections.
    mutating func wait(milliseconds: Int32, ready: inout [CInt]) -> Bool {
        ready.removeAll(keepingCapacity: true)
        var listenerReady = false
        #if os(Linux)
        let count = events.withUnsafeMutableBufferPointer { buffer in
            epoll_wait(epoll, buffer.baseAddress, Int32(buffer.count), milliseconds)
        }
        guard count > 0 else { return false }
        for index in 0..<Int(count) {
            let fd = events[index].data.fd
            if fd == listener { listenerReady = true } else { ready.append(fd) }
        }
        #else
        var polled = armed.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        if listening { polled.append(pollfd(fd: listener, events: Int16(POLLIN), revents: 0)) }
        guard poll(&polled, nfds_t(polled.count), milliseconds) > 0 else { return false }
        for entry in polled where entry.revents != 0 {
            if entry.fd == listener {
                listenerReady = true
            } else {
                armed.remove(entry.fd)
                ready.append(entry.fd)
            }
        }
        #endif
        return listenerReady
    }
}

/// The dispatcher's wait set could not be made: the system's `errno`.
struct DispatcherReadinessError: Error {
    var errno: CInt
}
