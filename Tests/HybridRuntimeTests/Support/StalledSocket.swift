import Foundation
import HybridTestSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A blocking loopback TCP client with a small receive buffer that reads only when asked to: a
/// peer that stops reading. Every send and read gives up after `ioTimeout`.
final class StalledSocket {
    private let fd: Int32

    init(port: Int, receiveBuffer: Int32 = 4096, ioTimeout: Int = 5) throws {
        guard let fd = LoopbackSocket.connect(port: port, ioTimeout: ioTimeout, receiveBuffer: receiveBuffer) else {
            throw POSIXError(.ECONNREFUSED)
        }
        self.fd = fd
    }

    /// Sends all of `bytes`; `false` when the send failed or timed out (the peer stopped reading).
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if sent < 0, errno == EINTR { continue }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    /// Reads up to the end of an HTTP response head (`\r\n\r\n`), one byte at a time, so nothing
    /// after it is consumed.
    func readResponseHead() -> String {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while bytes.count < 8192, !bytes.ends(with: [13, 10, 13, 10]) {
            guard Glibc.recv(fd, &byte, 1, 0) == 1 else { break }
            bytes.append(byte)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Ends this side's sending (FIN) and keeps the connection open for reading.
    func shutdownWrite() -> Bool {
        shutdown(fd, Int32(SHUT_WR)) == 0
    }

    func close() {
        Glibc.close(fd)
    }
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}

/// The resident set size of this process in KiB (VmRSS of /proc/self/status).
func residentKiB() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return -1 }
    for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
    }
    return -1
}
