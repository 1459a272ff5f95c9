import Glibc

/// The cost of the socket work one QR sign-in performs, done with plain blocking system calls on
/// one thread and nothing else: what the sockets alone cost on this machine, the part of a sign-in
/// that no implementation over real loopback sockets can avoid (the other part being the
/// ``CryptoFloor``).
///
/// One replica does what the harness's sign-in does on the wire (`hybrid-sim inspect` shows the
/// messages): the phone opens a TCP connection to the relay and sends its upgrade request, the relay
/// answers; a UDP advert; the desktop connects and upgrades the same way; handshake message 1 goes
/// from desktop to phone through the relay, the phone's three answers in one write back, then the
/// request, the response and the shutdown message; each side's close frame is relayed; the four
/// sockets are closed. "Through the relay" is a write by the sender, a read and a write by the relay
/// and a read by the receiver. The byte counts are a getAssertion's, within a few tens of bytes (at
/// these sizes the kernel's cost does not depend on them). No epoll, no framework, no copies beyond
/// the system calls': a floor, not an implementation.
public struct SocketFloor: Sendable, Hashable, Codable {
    /// Replicas timed.
    public var count: Int
    /// Median wall time of a replica, in milliseconds.
    public var milliseconds: Double
    /// Fastest replica, in milliseconds.
    public var fastestMilliseconds: Double

    /// Bytes of each step of a replica (sender's write; the relay passes the same count on).
    enum Size {
        static let newRequest = 214, newResponse = 174
        static let advert = 23
        static let connectRequest = 236, connectResponse = 142
        static let handshake1 = 87, handshakeAnswers = 402, request = 174, response = 318, shutdown = 38
        static let close = 8
    }

    /// Times `rounds` rounds of replicas, interleaved by the caller with other work through
    /// ``Sampler``.
    public struct Sampler {
        private let listener: CInt
        private let listenAddress: sockaddr_in
        private let udpSender: CInt
        private let udpReceiver: CInt
        private let udpAddress: sockaddr_in
        private var buffer = [UInt8](repeating: 0x5A, count: 4096)
        private var samples: [Duration] = []
        /// Replicas per ``round()``.
        public let replicas: Int

        /// Binds a loopback listener and two UDP sockets, kept until ``close()``.
        ///
        /// - Throws: ``RuntimeError`` `.bindFailed` when a socket cannot be made or bound.
        public init(replicas: Int = 20) throws {
            self.replicas = replicas
            var opened: [CInt] = []
            do {
                listener = try Self.socket(SOCK_STREAM)
                opened.append(listener)
                var one: CInt = 1
                _ = setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<CInt>.size))
                listenAddress = try Self.bindLoopback(listener)
                guard Glibc.listen(listener, 16) == 0 else { throw Self.failure("listen") }
                udpSender = try Self.socket(SOCK_DGRAM)
                opened.append(udpSender)
                udpReceiver = try Self.socket(SOCK_DGRAM)
                opened.append(udpReceiver)
                udpAddress = try Self.bindLoopback(udpReceiver)
                try Self.setTimeout(udpReceiver)
            } catch {
                for fd in opened { _ = Glibc.close(fd) }
                throw error
            }
        }

        /// Closes the sockets.
        public func close() {
            for fd in [listener, udpSender, udpReceiver] { _ = Glibc.close(fd) }
        }

        /// Times ``replicas`` sign-ins' socket work, one after another.
        ///
        /// - Throws: ``RuntimeError`` when a system call fails or a read waits more than a second.
        public mutating func round() throws {
            for _ in 0..<replicas {
                let start = ContinuousClock.now
                try replica()
                samples.append(ContinuousClock.now - start)
            }
        }

        /// The floor: median and fastest replica.
        public var result: SocketFloor {
            let summary = LatencySummary(samples: samples)
            return SocketFloor(count: summary.count, milliseconds: summary.p50, fastestMilliseconds: summary.min)
        }

        private mutating func replica() throws {
            let (phone, relayPhone) = try connectAndUpgrade(request: Size.newRequest, response: Size.newResponse)
            defer { _ = Glibc.close(phone); _ = Glibc.close(relayPhone) }
            let sent = withUnsafePointer(to: udpAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(udpSender, buffer, Size.advert, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard sent == Size.advert else { throw Self.failure("sendto") }
            try receive(udpReceiver, Size.advert)
            let (desktop, relayDesktop) = try connectAndUpgrade(request: Size.connectRequest, response: Size.connectResponse)
            defer { _ = Glibc.close(desktop); _ = Glibc.close(relayDesktop) }
            let toPhone = (desktop, relayDesktop, relayPhone, phone)
            let toDesktop = (phone, relayPhone, relayDesktop, desktop)
            try relay(toPhone, Size.handshake1)
            try relay(toDesktop, Size.handshakeAnswers)
            try relay(toPhone, Size.request)
            try relay(toDesktop, Size.response)
            try relay(toPhone, Size.shutdown)
            try relay(toPhone, Size.close)
            try relay(toDesktop, Size.close)
        }

        /// A TCP connection to the listener with its upgrade request and response.
        private mutating func connectAndUpgrade(request: Int, response: Int) throws -> (client: CInt, server: CInt) {
            let client = try Self.socket(SOCK_STREAM)
            var one: CInt = 1
            _ = setsockopt(client, CInt(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<CInt>.size))
            let connected = withUnsafePointer(to: listenAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard connected == 0 else {
                let error = Self.failure("connect")
                _ = Glibc.close(client)
                throw error
            }
            let server = accept(listener, nil, nil)
            guard server >= 0 else {
                let error = Self.failure("accept")
                _ = Glibc.close(client)
                throw error
            }
            _ = setsockopt(server, CInt(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<CInt>.size))
            do {
                try Self.setTimeout(client)
                try Self.setTimeout(server)
                try send(client, request)
                try receive(server, request)
                try send(server, response)
                try receive(client, response)
            } catch {
                _ = Glibc.close(client)
                _ = Glibc.close(server)
                throw error
            }
            return (client, server)
        }

        /// `count` bytes from `path.0` through the relay's two sockets to `path.3`.
        private mutating func relay(_ path: (CInt, CInt, CInt, CInt), _ count: Int) throws {
            try send(path.0, count)
            try receive(path.1, count)
            try send(path.2, count)
            try receive(path.3, count)
        }

        private func send(_ fd: CInt, _ count: Int) throws {
            let written = buffer.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, count) }
            guard written == count else { throw Self.failure("write") }
        }

        private mutating func receive(_ fd: CInt, _ count: Int) throws {
            var received = 0
            while received < count {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + received, count - received) }
                guard n > 0 else { throw Self.failure(n == 0 ? "read (end of stream)" : "read") }
                received += n
            }
        }

        private static func socket(_ type: __socket_type) throws -> CInt {
            let fd = Glibc.socket(AF_INET, CInt(type.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw RuntimeError(.bindFailed, "socket floor: socket() failed: \(String(cString: strerror(errno)))") }
            return fd
        }

        /// Binds `fd` to an ephemeral loopback port; returns the bound address.
        private static func bindLoopback(_ fd: CInt) throws -> sockaddr_in {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
                }
            }
            guard bound else { throw RuntimeError(.bindFailed, "socket floor: cannot bind a loopback socket: \(String(cString: strerror(errno)))") }
            return address
        }

        /// A read waits at most a second: a replica never hangs.
        private static func setTimeout(_ fd: CInt) throws {
            var limit = timeval(tv_sec: 1, tv_usec: 0)
            guard setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size)) == 0 else {
                throw failure("setsockopt(SO_RCVTIMEO)")
            }
        }

        /// The error of the system call that just failed (read `errno` before anything else runs).
        private static func failure(_ call: String) -> RuntimeError {
            let code = errno
            let reason = String(cString: strerror(code))
            if code == EAGAIN || code == EWOULDBLOCK {
                return RuntimeError(.timeout, "socket floor: \(call) waited more than a second")
            }
            return RuntimeError(.connectionFailed, "socket floor: \(call) failed: \(reason)")
        }
    }
}
