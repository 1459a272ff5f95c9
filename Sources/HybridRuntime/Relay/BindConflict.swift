#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import NIOCore

/// Why a port is "already in use" when nothing listens on it: on Linux a TCP connection that had
/// this port as its own local port (any client's, picked by the kernel from its ephemeral range)
/// holds it for about a minute in TIME-WAIT after closing, and a listener cannot bind it until then.
/// This project's default ports (47001, 47002) lie inside the usual ephemeral range (32768–60999),
/// so after many connections this happens without anything being wrong.
package enum BindConflict {
    /// A hint for an `EADDRINUSE` on `host:port`, or `nil` when something does listen there (then
    /// the plain "address already in use" is the whole story) or the port is 0.
    package static func hint(host: String, port: Int) -> String? {
        guard port > 0, !listening(host: host, port: port) else { return nil }
        let range = ephemeralRange().map { " (this machine's range: \($0.lowerBound)–\($0.upperBound))" } ?? ""
        return "nothing is listening there: a connection that has, or recently had, this port as its own local port "
            + "holds it (after it closes, for about a minute: TCP TIME-WAIT). Wait a minute, or pick a port outside the "
            + "kernel's range for such ports\(range)"
    }

    /// `error`'s system reason, with ``hint(host:port:)`` in brackets when it is `EADDRINUSE` and
    /// nothing listens on `host:port`: the words every listener of this project uses.
    package static func reason(_ error: any Error, host: String, port: Int) -> String {
        guard let code = (error as? IOError)?.errnoCode else { return RuntimeError.systemReason(error) }
        return reason(errno: code, host: host, port: port)
    }

    /// ``reason(_:host:port:)`` for a failed socket call's `errno`; out of descriptors
    /// (`EMFILE`), the process's limit and what to do: `too many open files (limit 64): raise
    /// ulimit -n`, the port being no part of it.
    package static func reason(errno code: CInt, host: String, port: Int) -> String {
        if code == EMFILE { return AcceptFailures.reason(errno: code) + ": raise `ulimit -n`" }
        let reason = RuntimeError.systemReason(errno: code)
        guard code == EADDRINUSE, let hint = hint(host: host, port: port) else { return reason }
        return "\(reason) (\(hint))"
    }

    /// What to add to a failed bind's line when its port came from `flag`:
    /// `; give another --port, or 0 for a free one`; nothing when the port was 0 already or the
    /// failure is the system's shortage (descriptors, memory: ``AcceptFailures/pauses(errno:)``),
    /// which another port would not mend.
    package static func portAdvice(errno code: CInt?, port: Int, flag: String) -> String {
        guard port != 0, !(code.map { AcceptFailures.pauses(errno: $0) } ?? false) else { return "" }
        return "; give another \(flag), or 0 for a free one"
    }

    /// Whether a TCP connection to `host:port` is accepted (something listens), probing the first
    /// address the host resolves to, as a listener binds it (RelayDispatcher does the same). `true`
    /// when unsure (no answer within 500 ms, a host that does not resolve): `false` is a refusal.
    static func listening(host: String, port: Int) -> Bool {
        guard let address = try? SocketAddress.makeAddressResolvingHost(host, port: port) else { return true }
        let family = address.protocol == .inet6 ? AF_INET6 : AF_INET
        return address.withSockAddr { pointer, length in accepts(family: family, address: pointer, length: socklen_t(length)) }
    }

    /// Whether every address `host` resolves to refuses a TCP connection on `port`, as a client
    /// that tries them all (SwiftNIO's happy eyeballs) would find: `localhost` is `::1` first on
    /// most hosts, where a relay on 127.0.0.1 is still reached. `false` when unsure or unresolved.
    package static func refusesConnections(host: String, port: Int) -> Bool {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(LoopbackAddress.unbracketed(host), String(port), &hints, &list) == 0, list != nil else { return false }
        defer { freeaddrinfo(list) }
        var node = list
        while let entry = node {
            if let address = entry.pointee.ai_addr,
                accepts(family: entry.pointee.ai_family, address: address, length: entry.pointee.ai_addrlen)
            {
                return false
            }
            node = entry.pointee.ai_next
        }
        return true
    }

    /// Whether a non-blocking connect to `address` is accepted or gets no answer within 500 ms
    /// (`true`), rather than refused (`false`).
    private static func accepts(family: Int32, address: UnsafePointer<sockaddr>, length: socklen_t) -> Bool {
        #if canImport(Glibc)
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(family, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { return true }
        defer { close(fd) }
        // Non-blocking, at most 500 ms: a listener whose accept queue is full drops the SYN, and a
        // blocking connect would retry for a minute or more before the error line could be printed.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        if connect(fd, address, length) == 0 { return true }
        guard errno == EINPROGRESS else { return errno != ECONNREFUSED }
        var ready = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        guard poll(&ready, 1, 500) == 1 else { return true }  // no answer in time: assume a listener
        var error: CInt = 0
        var size = socklen_t(MemoryLayout<CInt>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0 else { return true }
        return error != ECONNREFUSED
    }

    /// `/proc/sys/net/ipv4/ip_local_port_range`, if readable.
    static func ephemeralRange() -> ClosedRange<Int>? {
        guard let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8) else {
            return nil
        }
        let numbers = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        guard numbers.count == 2, numbers[0] <= numbers[1] else { return nil }
        return numbers[0]...numbers[1]
    }
}
