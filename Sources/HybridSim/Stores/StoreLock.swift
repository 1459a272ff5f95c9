import Foundation
import HybridFiles

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The advisory lock that serializes writers of one store file across processes.
///
/// The lock is `flock(2)` on a sidecar file next to the store (`passkeys.json.lock`), never on the
/// store itself: the store is replaced by `rename`, so a lock on its inode would guard a file that is
/// no longer the store. The sidecar is created once (mode 0600, never followed through a symlink) and
/// left in place; it holds no data. Holders keep the lock only around re-read, merge and write (a few
/// milliseconds), never for a whole ceremony; readers (`load`) do not take it, because every write is
/// an atomic rename (except `PhoneLinkStore.load`, which writes: it upgrades a version-1 file). The lock is released when the descriptor closes, so a crashed holder never
/// leaves the store locked.
enum StoreLock {
    /// How long a writer waits for another writer before giving up with ``StoreError/Code/locked``.
    static let defaultWait: Duration = .seconds(10)

    /// The sidecar lock file of `path`.
    static func lockPath(for path: String) -> String { path + ".lock" }

    /// Takes the exclusive lock of the store at `path` for as long as the returned descriptor stays
    /// open (a file one process owns for its whole life: a relay's contact memory); fails at once
    /// when another process holds it.
    /// Only a lock another process holds is `locked`; a lock file that cannot be opened or locked
    /// is `unreadable` (a setup problem, not a busy file).
    static func hold(path: String) throws(StoreError) -> Int32 {
        let fd: Int32
        do {
            fd = try openLockFile(for: path)
        } catch {
            throw StoreError(.unreadable, path: path, error.reason, systemError: error.systemError)
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            close(fd)
            guard code == EWOULDBLOCK else {
                throw StoreError(
                    .unreadable, path: path, "cannot lock \(lockPath(for: path)): \(AtomicFile.systemMessage(code))", systemError: code)
            }
            throw StoreError(.locked, path: path, "another process holds \(lockPath(for: path)) (another relay started with the same file?)")
        }
        return fd
    }

    /// Opens (creating it, mode 0600) the lock file of the store at `path`, and the directory.
    private static func openLockFile(for path: String) throws(StoreError) -> Int32 {
        let directory = try AtomicFile.components(of: path).directory
        try AtomicFile.ensureDirectory(directory, for: path)
        let lockPath = lockPath(for: path)
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            let code = errno
            throw StoreError(
                .locked, path: path, "cannot open the lock file \(lockPath): \(openFailure(code, lockPath: lockPath))", systemError: code)
        }
        return fd
    }

    /// Why the lock file at `lockPath` could not be opened (`code`, an errno), with what to do.
    static func openFailure(_ code: Int32, lockPath: String) -> String {
        if code == ELOOP && FileReader.isSymbolicLink(lockPath) {
            return "it is a symbolic link, which is not followed (remove it: the next run makes a new lock file)"
        }
        guard code == EACCES || code == EROFS else { return AtomicFile.systemMessage(code) }
        let directory = (try? AtomicFile.components(of: String(lockPath.dropLast(".lock".count))).directory) ?? "."
        var info = stat()
        if code == EACCES, lstat(lockPath, &info) == 0, access(directory, W_OK | X_OK) == 0 {
            // The directory is fine: the lock file itself is another user's (a run as root) or read-only.
            return "\(AtomicFile.systemMessage(code)) (the lock file is owned by uid \(info.st_uid) with mode "
                + "\(String(info.st_mode & 0o777, radix: 8)), and this user, uid \(geteuid()), cannot write it: remove it, "
                + "it holds no data and the next write makes a new one, or give it to this user)"
        }
        // Reading the store needs no write access, but its lock file is made beside it.
        return "\(AtomicFile.systemMessage(code)) (the lock file is created beside the store: its directory "
            + "\(directory) must be writable by this user)"
    }

    /// Checks, creating nothing, that a later write of the store at `path` can take its lock and
    /// replace the file: the nearest existing directory on the way to it is a directory this user
    /// may write in, and an existing lock file is one it may open. A program that will save calls
    /// it at start, so a store it could never write is found before any socket, not after the user
    /// approved (the phone may have saved a passkey the relying party then never learns).
    /// - Throws: ``StoreError``: `directoryFailed` (a file where a directory must be), `writeFailed`
    ///   (a directory this user cannot write in), `locked` (a lock file it cannot open).
    static func checkWritable(path: String) throws(StoreError) {
        var directory = try AtomicFile.components(of: path).directory
        var isDirectory: ObjCBool = false
        while !FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) {
            let parent = (directory as NSString).deletingLastPathComponent
            let next = parent.isEmpty ? "." : parent
            guard next != directory else { break }
            directory = next
        }
        guard isDirectory.boolValue else {
            throw StoreError(.directoryFailed, path: path, "\(directory) is not a directory")
        }
        guard access(directory, W_OK | X_OK) == 0 else {
            let code = errno
            throw StoreError(
                .writeFailed, path: path,
                "this user cannot write in \(directory): \(AtomicFile.systemMessage(code)) (the store is replaced there, beside its lock file)",
                systemError: code)
        }
        let lockPath = lockPath(for: path)
        if FileManager.default.fileExists(atPath: lockPath), access(lockPath, R_OK | W_OK) != 0 {
            let code = errno
            throw StoreError(
                .locked, path: path, "cannot open the lock file \(lockPath): \(openFailure(code, lockPath: lockPath))", systemError: code)
        }
    }

    /// Runs `body` holding the exclusive lock of the store at `path`; creates the directory if needed.
    static func withLock<T>(
        path: String, wait: Duration = defaultWait, _ body: () throws(StoreError) -> T
    ) throws(StoreError) -> T {
        let fd = try openLockFile(for: path)
        let lockPath = lockPath(for: path)
        defer { close(fd) }
        let deadline = ContinuousClock.now + wait
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            guard code == EWOULDBLOCK || code == EINTR else {
                throw StoreError(.locked, path: path, "cannot lock \(lockPath): \(AtomicFile.systemMessage(code))", systemError: code)
            }
            guard ContinuousClock.now < deadline else {
                throw StoreError(
                    .locked, path: path, "another process held \(lockPath) for more than \(wait.components.seconds) s")
            }
            usleep(2_000)
        }
        defer { flock(fd, LOCK_UN) }
        return try body()
    }
}
