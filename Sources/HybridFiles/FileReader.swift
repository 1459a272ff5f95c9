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
    /// Whether `path` itself is a symbolic link (not followed). An `open` with `O_NOFOLLOW` that
    /// fails with `ELOOP` says so only with this: a loop among the directories above the path
    /// fails the same way.
    package static func isSymbolicLink(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFLNK
    }

    /// How long a pipe, socket or device may go without data before the read gives up.
    package static let quietLimit: Duration = .seconds(10)

    /// The whole file at `path` (a symbolic link is followed); `-` is standard input, read from
    /// descriptor 0 itself (reopening /dev/stdin fails for a socket, ENXIO, and would read a
    /// redirected file from its start rather than from where the caller left it), and refused at
    /// once when it is a terminal.
    ///
    /// - Throws: ``FileFailure``; `.terminal` for `-` on a terminal.
    package static func read(_ path: String, maximumSize: Int, quietLimit: Duration = quietLimit) throws(FileFailure) -> [UInt8] {
        if path == "-" {
            guard isatty(STDIN_FILENO) == 0 else { throw .terminal }
            return try readWhole(STDIN_FILENO, maximumSize: maximumSize, quietLimit: quietLimit)
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw .system(errno) }
        defer { close(fd) }
        return try readWhole(fd, maximumSize: maximumSize, quietLimit: quietLimit)
    }

    /// An open descriptor to its end: a directory refused, a regular file read at once, anything
    /// else as its data comes, within `quietLimit`.
    private static func readWhole(_ fd: Int32, maximumSize: Int, quietLimit: Duration) throws(FileFailure) -> [UInt8] {
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
    /// - Throws: ``FileFailure``.
    package static func readToEnd(_ fd: Int32, maximumSize: Int, quietLimit: Duration? = nil) throws(FileFailure) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            if let quietLimit {
                var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let polled = poll(&ready, 1, FileFailure.milliseconds(quietLimit))
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
