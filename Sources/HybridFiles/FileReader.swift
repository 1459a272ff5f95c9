#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Whole-file reads with POSIX calls, shared by everything that reads a file the user named (QR
/// images and captures, options, recordings, key logs) and by the stores: one read loop, so each
/// reader has the same size cap, the system's own words for a failure, and no wait without a limit.
///
/// A regular file is read to its end. Anything else (a named pipe, `<(cmd)`, a terminal, a device)
/// is read as its data comes, but a quiet spell without data or its end fails the read: the open
/// does not wait for a writer (`O_NONBLOCK`), and a pipe nobody writes to, or one whose writer
/// never writes (`--options <(sleep 100)`), is an error instead of a program held forever. The
/// limit is on each wait for data, not on the whole read: a writer that keeps sending is read,
/// up to the size cap.
package enum FileReader {
    /// How long a pipe, socket or device may go without data before the read gives up.
    package static let quietLimit: Duration = .seconds(10)

    /// Why a read failed. The description is one lower-case line without the path (the caller names
    /// the file): `no such file or directory`, `it is a directory`, `larger than 16 MiB`, …
    package enum Failure: Error, Equatable, CustomStringConvertible {
        /// `open`, `fstat`, `poll` or `read` failed with this `errno`.
        case system(Int32)
        /// The path names a directory.
        case directory
        /// More than `maximumSize` bytes came.
        case tooLarge(maximumSize: Int)
        /// A pipe or device sent neither data nor its end for this long.
        case quiet(Duration)

        package var description: String {
            switch self {
            case .system(let code): return String(cString: strerror(code)).lowercased()
            case .directory: return "it is a directory"
            case .tooLarge(let maximumSize):
                return maximumSize % (1 << 20) == 0 ? "larger than \(maximumSize >> 20) MiB" : "larger than \(maximumSize) bytes"
            case .quiet(let limit): return "no data for \(Self.words(limit)) (a pipe or device nobody writes to?)"
            }
        }

        private static func words(_ limit: Duration) -> String {
            let milliseconds = Self.milliseconds(limit)
            return milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
        }

        /// `limit` in whole milliseconds for `poll`: 0 for a negative limit (which `poll` would take
        /// as "wait forever"), at most `Int32.max` (about 24 days).
        static func milliseconds(_ limit: Duration) -> Int32 {
            let (seconds, attoseconds) = limit.components
            guard seconds >= 0, attoseconds >= 0 else { return 0 }
            guard seconds < Int64(Int32.max) / 1000 else { return Int32.max }
            return Int32(seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        }
    }

    /// The whole file at `path` (a symbolic link is followed).
    ///
    /// - Throws: ``Failure``.
    package static func read(_ path: String, maximumSize: Int, quietLimit: Duration = quietLimit) throws(Failure) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw .system(errno) }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw .system(errno) }
        let kind = status.st_mode & S_IFMT
        guard kind != S_IFDIR else { throw .directory }
        return try readToEnd(fd, maximumSize: maximumSize, quietLimit: kind == S_IFREG ? nil : quietLimit)
    }

    /// Reads the open descriptor `fd` to its end, retrying on `EINTR`, refusing more than
    /// `maximumSize` bytes. With a `quietLimit` (for anything but a regular file) each read first
    /// waits at most that long for data; `nil` reads at once, as for a regular file.
    ///
    /// - Throws: ``Failure``.
    package static func readToEnd(_ fd: Int32, maximumSize: Int, quietLimit: Duration? = nil) throws(Failure) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            if let quietLimit {
                var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let polled = poll(&ready, 1, Failure.milliseconds(quietLimit))
                if polled < 0 {
                    if errno == EINTR { continue }
                    throw .system(errno)
                }
                guard polled != 0 else { throw .quiet(quietLimit) }
            }
            let count = chunk.withUnsafeMutableBytes { systemRead(fd, $0.baseAddress, $0.count) }
            if count == 0 { return bytes }
            if count < 0 {
                // EAGAIN: a descriptor opened non-blocking that poll called ready too early.
                if errno == EINTR || (errno == EAGAIN && quietLimit != nil) { continue }
                throw .system(errno)
            }
            bytes.append(contentsOf: chunk[..<count])
            guard bytes.count <= maximumSize else { throw .tooLarge(maximumSize: maximumSize) }
        }
    }
}

/// The C library's `read(2)` (inside ``FileReader`` the name is its own `read`).
private func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(fd, buffer, count)
}
