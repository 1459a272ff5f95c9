#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A blocking TCP connection to `127.0.0.1`, for tests that write raw bytes to a server (a stalled
/// peer, a request with chosen headers).
public enum LoopbackSocket {
    /// Connects to `127.0.0.1:port`; every send and receive on the descriptor gives up after
    /// `ioTimeout` seconds. `receiveBuffer` (bytes) is set before the connect, so a small one holds.
    ///
    /// - Returns: the connected descriptor (the caller closes it), or `nil` when the socket or the
    ///   connect failed.
    public static func connect(port: Int, ioTimeout: Int = 10, receiveBuffer: Int32? = nil) -> Int32? {
        #if canImport(Glibc)
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { return nil }
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var limit = timeval(tv_sec: ioTimeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                posixConnect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else {
            close(fd)
            return nil
        }
        return fd
    }

    /// What a server answered one raw request, and whether it closed the connection.
    public struct Exchange: Sendable {
        /// Everything the server sent, as UTF-8.
        public var response: String
        /// `true` when the server closed the connection; `false` when `ioTimeout` passed first.
        public var closed: Bool
        /// The status code of the response's first line, or 0.
        public var status: Int {
            let statusLine = response.split(separator: "\r\n", maxSplits: 1).first ?? ""
            return statusLine.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        }
    }

    /// Connects to `127.0.0.1:port`, sends `request` as it is (nothing when empty) and reads until
    /// the server closes or `ioTimeout` seconds pass without a byte. `nil` when the connect failed.
    public static func exchange(port: Int, _ request: String, ioTimeout: Int = 5) -> Exchange? {
        guard let fd = connect(port: port, ioTimeout: ioTimeout) else { return nil }
        defer { close(fd) }
        guard request.isEmpty || send(fd, request) else { return nil }
        let (response, closed) = read(fd, until: nil)
        return Exchange(response: response, closed: closed)
    }

    /// Sends `text` whole on `fd`; `false` when the send failed or was short.
    public static func send(_ fd: Int32, _ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { posixSend(fd, $0.baseAddress, $0.count) } == bytes.count
    }

    /// Reads from `fd` until what arrived contains `marker`, the peer closes, or the descriptor's
    /// receive timeout passes; returns what arrived, as UTF-8.
    public static func receive(_ fd: Int32, until marker: String) -> String {
        read(fd, until: marker).text
    }

    /// Reads until what arrived contains `marker` (`nil`: until the end), the peer closes
    /// (`closed`), or the receive timeout passes.
    private static func read(_ fd: Int32, until marker: String?) -> (text: String, closed: Bool) {
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let text = String(decoding: received, as: UTF8.self)
            if let marker, text.contains(marker) { return (text, false) }
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return (text, count == 0) }
            received += chunk[..<count]
        }
    }

    private static func posixSend(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int {
        #if canImport(Glibc)
            Glibc.send(fd, bytes, count, 0)
        #else
            Darwin.send(fd, bytes, count, 0)
        #endif
    }

    private static func posixConnect(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
        #if canImport(Glibc)
            Glibc.connect(fd, address, length)
        #else
            Darwin.connect(fd, address, length)
        #endif
    }

    /// A local port whose only user is a client connection that closed first, so it is in TCP
    /// TIME-WAIT: made without `SO_REUSEADDR`, as a kernel-chosen client port is, so a listener
    /// cannot bind it for about a minute although nothing listens on it. `nil` when a socket call failed.
    public static func portInTimeWait() -> Int? {
        func local(_ fd: Int32) -> Int {
            var bound = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &bound) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
            return Int(UInt16(bigEndian: bound.sin_port))
        }
        #if canImport(Glibc)
            let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let listener = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        defer { close(listener) }
        var any = sockaddr_in()
        any.sin_family = sa_family_t(AF_INET)
        any.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let bound = withUnsafePointer(to: &any) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        // The client: an ordinary connect (``connect(port:ioTimeout:receiveBuffer:)``), kernel-chosen port.
        guard listener >= 0, bound == 0, listen(listener, 1) == 0, let client = connect(port: local(listener)) else { return nil }
        let accepted = accept(listener, nil, nil)
        let port = local(client)
        close(client)  // the client closes first: its end, with its local port, goes to TIME-WAIT
        var byte: UInt8 = 0
        _ = systemRead(accepted, &byte, 1)  // the FIN
        close(accepted)
        return port
    }
}

/// The C library's `read`.
private func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
    #if canImport(Glibc)
        Glibc.read(fd, buffer, count)
    #else
        Darwin.read(fd, buffer, count)
    #endif
}
