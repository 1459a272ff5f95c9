#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HybridRuntime

/// Reads a file the user named (an options file, a recording, a key log) with POSIX calls, so a
/// failure is worded by the system ("no such file or directory", "permission denied") instead of
/// Foundation's "The operation could not be completed", and a directory or an endless file such as
/// `/dev/zero` is refused instead of read.
///
/// Unlike a store (``AtomicFile/read(path:)``), a symbolic link is followed and a pipe is read (a
/// user may give `--options <(curl …)`), so only the read loop is shared. The open does not wait
/// for a writer: a named pipe nobody has opened for writing reads as empty at once instead of
/// holding the program in `open` forever.
package enum InputFile {
    /// The largest file read (16 MiB): options, recordings and key logs are far smaller.
    package static let maximumSize = 16 << 20

    /// The whole file at `path`.
    ///
    /// - Throws: ``Failure``: one line without the path (the caller names the file).
    package static func read(_ path: String, maximumSize: Int = maximumSize) throws(Failure) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw Failure(reason: RuntimeError.systemReason(errno: errno)) }
        defer { close(fd) }
        // Only the open was not to block: the reads of a pipe wait for its data as before.
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0, fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 else {
            throw Failure(reason: RuntimeError.systemReason(errno: errno))
        }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw Failure(reason: RuntimeError.systemReason(errno: errno)) }
        guard status.st_mode & S_IFMT != S_IFDIR else { throw Failure(reason: "it is a directory") }
        let bytes: [UInt8]
        do {
            bytes = try AtomicFile.readToEnd(fd, maximumSize: maximumSize)
        } catch {
            switch error {
            case .tooLarge: throw Failure(reason: "larger than \(maximumSize >> 20) MiB")
            case .system(let code): throw Failure(reason: RuntimeError.systemReason(errno: code))
            }
        }
        if bytes.isEmpty, status.st_mode & S_IFMT == S_IFIFO {
            throw Failure(reason: "nothing to read (a named pipe nobody has opened for writing?)")
        }
        return bytes
    }

    /// Why a file could not be read.
    package struct Failure: Error, CustomStringConvertible {
        /// The reason, lower case, e.g. `no such file or directory`.
        package let reason: String
        package var description: String { reason }
    }
}
