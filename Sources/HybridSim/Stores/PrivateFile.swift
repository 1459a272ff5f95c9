import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writes files that hold a secret but are not stores (the `--qr-png` image carries the QR secret):
/// mode 0600 whatever the umask, never through a symbolic link, replaced atomically.
enum PrivateFile {
    /// Replaces `path` with `bytes`, mode 0600 (``AtomicFile`` writes a new file and renames it over
    /// the target, so a symlink planted at `path` is replaced, not followed).
    ///
    /// - Throws: ``Failure``, one line saying what failed.
    static func write(_ bytes: [UInt8], to path: String) throws(Failure) {
        do {
            try AtomicFile.write(bytes, to: path)
        } catch {
            throw Failure(description: error.reason)
        }
    }

    /// Why a private file was not written.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }
}
