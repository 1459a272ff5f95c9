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
    /// the target, so a symlink planted at `path` is replaced, not followed). Unlike a store's, the
    /// file's directory must exist: a mistyped path is reported, not created.
    ///
    /// - Throws: ``Failure``, one line saying what failed.
    static func write(_ bytes: [UInt8], to path: String) throws(Failure) {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw Failure(description: "\(path) is a directory")
        }
        do {
            try AtomicFile.write(bytes, to: path, createsDirectory: false)
        } catch {
            throw Failure(description: error.reason)
        }
    }

    /// Why a private file was not written.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }
}
