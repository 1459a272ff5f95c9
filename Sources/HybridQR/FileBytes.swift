#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Whole-file reads and writes with POSIX calls, so errors carry `strerror` text.
enum FileBytes {
    /// The largest input file accepted (64 MiB); a QR image or capture is far smaller.
    static let maximumSize = 64 << 20

    /// How long a pipe, socket or device may go without data before the read gives up.
    static let quietLimit: Duration = .seconds(10)

    /// Reads the whole file at `path`.
    ///
    /// A regular file is read to its end. Anything else (a named pipe, `<(cmd)`, a terminal, a
    /// device) is read as its data comes, but after `quietLimit` without data or its end the read
    /// fails instead of waiting forever: a named pipe nobody writes to would otherwise hold the
    /// program at the `open` (which here does not wait for a writer) or at the first read.
    ///
    /// - Throws: ``QRError/Code/fileUnreadable`` with the system's reason, if the file is larger
    ///   than ``maximumSize``, or if a pipe or device stayed quiet for `quietLimit`.
    static func read(_ path: String, quietLimit: Duration = quietLimit) throws(QRError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw QRError(.fileUnreadable, "\(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw QRError(.fileUnreadable, "\(path): \(String(cString: strerror(errno)))") }
        let waits = status.st_mode & S_IFMT != S_IFREG
        let milliseconds = Int32(clamping: quietLimit.components.seconds * 1000 + quietLimit.components.attoseconds / 1_000_000_000_000_000)
        let quietText = milliseconds < 1000 ? "\(milliseconds) ms" : "\(milliseconds / 1000) s"
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            if waits {
                var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let polled = poll(&ready, 1, milliseconds)
                if polled < 0 {
                    if errno == EINTR { continue }
                    throw QRError(.fileUnreadable, "\(path): \(String(cString: strerror(errno)))")
                }
                guard polled != 0 else {
                    throw QRError(
                        .fileUnreadable,
                        "\(path): no data for \(quietText) (a pipe or device nobody writes to?)")
                }
            }
            let count = chunk.withUnsafeMutableBytes { systemRead(fd, $0.baseAddress, $0.count) }
            if count == 0 { return bytes }
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw QRError(.fileUnreadable, "\(path): \(String(cString: strerror(errno)))")
            }
            bytes.append(contentsOf: chunk[..<count])
            guard bytes.count <= maximumSize else {
                throw QRError(.fileUnreadable, "\(path): larger than \(maximumSize >> 20) MiB")
            }
        }
    }

    /// Writes `bytes` to `path`, replacing the file.
    ///
    /// - Throws: ``QRError/Code/writeFailed`` with the system's reason.
    static func write(_ bytes: [UInt8], to path: String) throws(QRError) {
        guard let file = fopen(path, "wb") else {
            throw QRError(.writeFailed, "\(path): \(String(cString: strerror(errno)))")
        }
        let written = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        let closed = fclose(file)
        guard written == bytes.count, closed == 0 else {
            throw QRError(.writeFailed, "\(path): \(String(cString: strerror(errno)))")
        }
    }
}

/// The C library's `read(2)` (inside ``FileBytes`` the name is its own `read`).
private func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(fd, buffer, count)
}
