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

    /// Writes `bytes` to `path`, replacing the file, with mode 0600: the image of a `FIDO:/` code
    /// holds its QR secret, so only its owner may read it (as `desktop --qr-png` writes it). A file
    /// already there keeps its inode and gets mode 0600.
    ///
    /// - Throws: ``QRError/Code/writeFailed`` with the system's reason.
    static func write(_ bytes: [UInt8], to path: String) throws(QRError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw QRError(.writeFailed, "\(path): \(String(cString: strerror(errno)))") }
        var failure = fchmod(fd, 0o600) == 0 ? 0 : errno
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
