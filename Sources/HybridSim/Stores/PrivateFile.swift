import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writes files that hold a secret but are not stores (the `--qr-png` image carries the QR secret,
/// `inspect --svg`'s diagram the decrypted messages): mode 0600 whatever the umask, never through a
/// symbolic link, replaced atomically.
package enum PrivateFile {
    /// Replaces `path` with `bytes`, mode 0600 (``AtomicFile`` writes a new file and renames it over
    /// the target, so a symlink planted at `path` is replaced, not followed). Unlike a store's, the
    /// file's directory must exist: a mistyped path is reported, not created.
    ///
    /// - Throws: ``Failure``, one line saying what failed.
    ///
    /// A path that leads to a pipe or a device (`/dev/stdout`, `/dev/null`, a named pipe) is written
    /// to as it is: renaming a file over it would replace the device node or the `/dev/stdout` link
    /// itself (as root, for everyone), and its mode is not the image's business. A named pipe with
    /// no reader is an error at once.
    package static func write(_ bytes: [UInt8], to path: String) throws(Failure) {
        var target = stat()
        if stat(path, &target) == 0 {
            switch target.st_mode & S_IFMT {
            case S_IFDIR: throw Failure(description: "\(path) is a directory")
            case S_IFREG: break
            default: return try writeInPlace(bytes, to: path)
            }
        }
        do {
            try AtomicFile.write(bytes, to: path, createsDirectory: false)
        } catch {
            throw Failure(description: error.reason)
        }
    }

    /// Writes `bytes` to the pipe or device at `path`, without creating, truncating or renaming.
    private static func writeInPlace(_ bytes: [UInt8], to path: String) throws(Failure) {
        let fd = open(path, O_WRONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            throw Failure(description: "\(path): \(errno == ENXIO ? "a named pipe nobody reads" : AtomicFile.systemMessage(errno))")
        }
        var failure: Int32 = 0
        let flags = fcntl(fd, F_GETFL)
        if flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 { failure = errno }
        var offset = 0
        while failure == 0, offset < bytes.count {
            #if canImport(Glibc)
                let count = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            #else
                let count = bytes.withUnsafeBytes { Darwin.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            #endif
            if count < 0 {
                if errno != EINTR { failure = errno }
            } else {
                offset += count
            }
        }
        if close(fd) != 0, failure == 0 { failure = errno }
        guard failure == 0 else { throw Failure(description: "\(path): \(AtomicFile.systemMessage(failure))") }
    }

    /// Why a private file was not written.
    package struct Failure: Error, CustomStringConvertible {
        /// One line saying what failed.
        package let description: String
    }
}
