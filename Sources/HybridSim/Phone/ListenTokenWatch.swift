#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Tells a running `phone --listen` that `phone --unlink`, run in another process, revoked the
/// listen token it holds (`PhoneListener.Configuration.isCurrent`). Without it, the listener
/// kept the old contact ID until a desktop contacted that ID, so a desktop linked again meanwhile
/// (under the new ID) found nobody listening, got 410 and deleted its new link.
///
/// Asked a few times a second, it re-reads the link store only when the file's inode, size or
/// modification time changed (stores are replaced by a rename, so a rewrite changes the inode). A
/// file that is missing or cannot be read counts as unchanged: the listener keeps its token, and
/// its pushes are refused while the store is unreadable (`PhoneListenProgram.answer`).
final class ListenTokenWatch: Sendable {
    private struct Stamp: Equatable {
        var inode: UInt64
        var size: Int64
        var seconds: Int
        var nanoseconds: Int
    }

    private let path: String
    private let contactID: [UInt8]
    private let state: Mutex<(stamp: Stamp?, current: Bool)>

    /// Watches `path` for a token other than the one of `contactID`.
    init(path: String, contactID: [UInt8]) {
        self.path = path
        self.contactID = contactID
        // No stamp yet: the first question reads the file, so an `--unlink` written between the
        // listener's own read of the store and this watch's start is not missed.
        self.state = Mutex((nil, true))
    }

    /// `false` once the store holds a different contact ID (it stays `false`).
    func isCurrent() -> Bool {
        state.withLock { state in
            guard state.current, let stamp = Self.stamp(path), stamp != state.stamp else { return state.current }
            guard let identity = try? PhoneLinkStore.load(path: path).identity else { return true }
            state.stamp = stamp
            state.current = identity.contactID == contactID
            return state.current
        }
    }

    private static func stamp(_ path: String) -> Stamp? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        #if canImport(Darwin)
        let modified = info.st_mtimespec
        #else
        let modified = info.st_mtim
        #endif
        return Stamp(
            inode: UInt64(info.st_ino), size: Int64(info.st_size), seconds: Int(modified.tv_sec),
            nanoseconds: Int(modified.tv_nsec))
    }
}
