import HybridFiles

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Whole-file reads and writes for QR images and captures, with the system's reasons in errors.
enum FileBytes {
    /// The largest input file accepted (64 MiB); a QR image or capture is far smaller.
    static let maximumSize = 64 << 20

    /// How long a pipe, socket or device may go without data before the read gives up.
    static let quietLimit = FileReader.quietLimit

    /// Reads the whole file at `path` (``FileReader``: a regular file to its end, a pipe or device
    /// as its data comes, until `quietLimit` passes without any).
    ///
    /// - Throws: ``QRError/Code/fileUnreadable`` with the path and the reason, if the file is larger
    ///   than ``maximumSize``, or if a pipe or device stayed quiet for `quietLimit`.
    static func read(_ path: String, quietLimit: Duration = quietLimit) throws(QRError) -> [UInt8] {
        do {
            return try FileReader.read(path, maximumSize: maximumSize, quietLimit: quietLimit)
        } catch {
            throw QRError(.fileUnreadable, "\(path): \(error)")
        }
    }

    /// Writes `bytes` to `path`. A regular file (new, or replaced) gets mode 0600: the image of a
    /// `FIDO:/` code holds its QR secret. Anything else (`/dev/stdout`, a pipe, a terminal,
    /// `/dev/null`) is written to as it is, its mode untouched. A file whose mode cannot be made
    /// 0600 (another user's) is left whole, not truncated, and the write fails.
    ///
    /// - Throws: ``QRError/Code/writeFailed`` with the system's reason.
    static func write(_ bytes: [UInt8], to path: String) throws(QRError) {
        // No O_TRUNC: nothing is cut before it is settled that the write may go ahead. O_NONBLOCK:
        // a named pipe nobody reads is an error at once (ENXIO), not an open that waits forever.
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0o600)
        guard fd >= 0 else {
            let reason = errno == ENXIO ? "a named pipe nobody reads" : String(cString: strerror(errno))
            throw QRError(.writeFailed, "\(path): \(reason)")
        }
        var failure: Int32 = 0
        var status = stat()
        let flags = fcntl(fd, F_GETFL)
        if flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 || fstat(fd, &status) != 0 {
            failure = errno
        } else if status.st_mode & S_IFMT == S_IFREG {
            if status.st_mode & 0o777 != 0o600, fchmod(fd, 0o600) != 0 {
                let reason = String(cString: strerror(errno))
                close(fd)
                throw QRError(.writeFailed, "\(path): cannot make it private (mode 0600): \(reason); nothing written")
            }
            if ftruncate(fd, 0) != 0 { failure = errno }
        }
        var offset = 0
        while failure == 0, offset < bytes.count {
            let count = bytes.withUnsafeBytes { systemWrite(fd, $0.baseAddress! + offset, $0.count - offset) }
            if count < 0 {
                if errno != EINTR { failure = errno }
            } else {
                offset += count
            }
        }
        if close(fd) != 0, failure == 0 { failure = errno }
        guard failure == 0 else { throw QRError(.writeFailed, "\(path): \(String(cString: strerror(failure)))") }
    }
}

/// The C library's `write(2)` (inside ``FileBytes`` the name is its own `write`).
private func systemWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, buffer, count)
}
