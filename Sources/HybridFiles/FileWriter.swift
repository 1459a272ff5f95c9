#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes with POSIX calls, shared by everything that writes a file the user named: the write
/// loop, an open that never waits for a pipe's reader, and the one way an output that holds a
/// secret is written (a QR image, a recording, a diagram of decrypted messages). The stores add
/// durability on top (`AtomicFile`: `fsync`, the directory's too).
package enum FileWriter {
    /// Writes all of `bytes` to `fd`, going on after a short write and retrying on `EINTR`.
    ///
    /// - Throws: ``FileFailure/system(_:)`` with the `errno` of the write that failed.
    package static func writeAll(_ bytes: [UInt8], to fd: Int32) throws(FileFailure) {
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { systemWrite(fd, $0.baseAddress! + offset, $0.count - offset) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .system(errno)
            }
            offset += count
        }
    }

    /// Opens `path` for writing with `flags` (`O_WRONLY` and what the caller adds) without waiting
    /// for a reader: a named pipe nobody reads is ``FileFailure/noReader`` at once, not an `open`
    /// that holds the program. The descriptor blocks again afterwards unless `blocking` is `false`.
    ///
    /// - Returns: the descriptor; the caller closes it.
    package static func openForWriting(
        _ path: String, flags: Int32, mode: mode_t = 0o600, blocking: Bool = true
    ) throws(FileFailure) -> Int32 {
        let fd = open(path, flags | O_CLOEXEC | O_NONBLOCK, mode)
        guard fd >= 0 else { throw errno == ENXIO ? .noReader : .system(errno) }
        guard blocking else { return fd }
        let current = fcntl(fd, F_GETFL)
        guard current >= 0, fcntl(fd, F_SETFL, current & ~O_NONBLOCK) == 0 else {
            let code = errno
            close(fd)
            throw .system(code)
        }
        return fd
    }

    /// The descriptor of this process that `path` names, if it names one: `/dev/stdout`,
    /// `/dev/stderr`, `/dev/stdin`, `/dev/fd/N`, `/proc/self/fd/N` (or `/proc/PID/fd/N` with this
    /// process's ID), directly or through a chain of symbolic links (at most 8). A shell's
    /// redirection (`> out.svg`) makes such a path lead to a regular file; what is written to it
    /// belongs in that stream, and the path itself (a link in `/dev`) must never be replaced.
    package static func ownDescriptor(_ path: String) -> Int32? {
        let prefixes = ["/dev/fd/", "/proc/self/fd/", "/proc/\(getpid())/fd/"]
        /// An open descriptor of a file, pipe or device: what a shell hands a program. Not a socket,
        /// an epoll or event descriptor of the program's own (`/dev/fd/7` could name SwiftNIO's).
        func usable(_ number: Int32) -> Int32? {
            var status = stat()
            guard fstat(number, &status) == 0 else { return nil }
            switch status.st_mode & S_IFMT {
            case S_IFREG, S_IFIFO, S_IFCHR: return number
            default: return nil
            }
        }
        var candidate = path
        for _ in 0..<8 {
            switch candidate {
            case "/dev/stdin": return usable(0)
            case "/dev/stdout": return usable(1)
            case "/dev/stderr": return usable(2)
            default: break
            }
            for prefix in prefixes where candidate.hasPrefix(prefix) {
                if let number = Int32(candidate.dropFirst(prefix.count)), number >= 0 { return usable(number) }
                return nil
            }
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let count = readlink(candidate, &buffer, buffer.count - 1)
            guard count > 0 else { return nil }
            let target = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            candidate = target.hasPrefix("/") ? target : split(candidate).directory + "/" + target
        }
        return nil
    }

    /// Whether writing to `path` writes where descriptor `fd` does: `path` names it
    /// (``ownDescriptor(_:)``: `/dev/stdout`, `/dev/fd/1`), or it is the file `fd` has open (the
    /// same device and inode: `--svg out.svg > out.svg`). For a command whose result goes to
    /// standard output, so that it does not print a second result into the same file.
    package static func names(_ path: String, descriptor fd: Int32) -> Bool {
        var named = stat()
        var open = stat()
        guard fstat(fd, &open) == 0 else { return false }
        if let own = ownDescriptor(path) {
            // `/dev/fd/3` may be a second descriptor of standard output's file.
            guard own != fd else { return true }
            guard fstat(own, &named) == 0 else { return false }
        } else {
            guard stat(path, &named) == 0 else { return false }
        }
        return named.st_dev == open.st_dev && named.st_ino == open.st_ino
    }

    /// Writes output that holds a secret to `path`.
    ///
    /// - One of this process's own descriptors (``ownDescriptor(_:)``: `/dev/stdout` redirected
    ///   to a file, `/dev/fd/3`): written through that descriptor, where the stream is.
    /// - A regular file, or none yet: replaced by a new file of mode 0600, whatever the umask,
    ///   written under a temporary name and renamed into place, so a reader never sees half of it
    ///   and a symbolic link planted at `path` is replaced, not followed. The directory must exist.
    /// - A pipe or device (`/dev/stdout`, a named pipe, `/dev/null`): written to as it is. Renaming
    ///   over it would replace the device node or the `/dev/stdout` link itself (as root, for
    ///   everyone), and its mode is not the output's business. One that another user owns is
    ///   refused (``checkOwner(of:)``).
    /// - A directory: refused.
    ///
    /// - Throws: ``FileFailure``.
    package static func replacePrivately(_ path: String, with bytes: [UInt8]) throws(FileFailure) {
        if let own = ownDescriptor(path) {
            // Text written to the stream before goes first (`print` buffers standard output).
            fflush(nil)
            return try writeAll(bytes, to: own)
        }
        var target = stat()
        if stat(path, &target) == 0 {
            switch target.st_mode & S_IFMT {
            case S_IFDIR: throw .directory
            case S_IFREG: break
            default:
                let fd = try openForWriting(path, flags: O_WRONLY)
                var opened = stat()
                guard fstat(fd, &opened) == 0 else {
                    let code = errno
                    close(fd)
                    throw .system(code)
                }
                // Swapped for a regular file (a link to someone's file) between the stat and the
                // open: not written through; replaced below like any regular file.
                if opened.st_mode & S_IFMT != S_IFREG {
                    defer { close(fd) }
                    try checkOwner(of: fd)
                    return try writeAll(bytes, to: fd)
                }
                close(fd)
            }
        }
        let (directory, name) = split(path)
        var folder = stat()
        guard stat(directory, &folder) == 0 else { throw errno == ENOENT ? .noDirectory(directory) : .system(errno) }
        guard folder.st_mode & S_IFMT == S_IFDIR else { throw .system(ENOTDIR) }

        let temporary = "\(directory)/.\(name).tmp-\(getpid())-\(String(UInt64.random(in: .min ... .max), radix: 16))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .system(errno) }
        var failure: FileFailure?
        if fchmod(fd, 0o600) != 0 { failure = .system(errno) }  // the umask may have taken bits away
        if failure == nil {
            do { try writeAll(bytes, to: fd) } catch { failure = error }
        }
        if close(fd) != 0, failure == nil { failure = .system(errno) }
        if failure == nil, rename(temporary, path) != 0 {
            let code = errno
            // EPERM from a sticky directory: say whose file it is, not only "operation not permitted".
            var existing = stat()
            if code == EPERM || code == EACCES, lstat(path, &existing) == 0, existing.st_uid != geteuid(),
                folder.st_mode & S_ISVTX != 0
            {
                failure = .othersFile(uid: UInt32(existing.st_uid))
            } else {
                failure = .system(code)
            }
        }
        if let failure {
            unlink(temporary)
            throw failure
        }
    }

    /// Refuses a pipe or device open on `fd` that another user owns (not this process's user, not
    /// root, which owns `/dev/null` and the terminals' nodes): a named pipe planted where an
    /// output was meant (`--qr-png /tmp/qr.png`, made with `mkfifo` by someone else) would hand
    /// them the secret. Checked on the open descriptor, so the object checked is the one written.
    ///
    /// - Throws: ``FileFailure/foreignOwner(kind:uid:)``; ``FileFailure/system(_:)`` if `fstat` fails.
    package static func checkOwner(of fd: Int32) throws(FileFailure) {
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw .system(errno) }
        guard status.st_uid != geteuid(), status.st_uid != 0 else { return }
        let kind: String
        switch status.st_mode & S_IFMT {
        case S_IFIFO: kind = "named pipe"
        case S_IFCHR, S_IFBLK: kind = "device"
        case S_IFSOCK: kind = "socket"
        case S_IFREG: kind = "file"
        default: kind = "special file"
        }
        throw .foreignOwner(kind: kind, uid: UInt32(status.st_uid))
    }

    /// `path`'s directory (`.` for a bare name) and last component.
    static func split(_ path: String) -> (directory: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        let directory = String(path[..<slash])
        return (directory.isEmpty ? "/" : directory, String(path[path.index(after: slash)...]))
    }
}

/// The C library's `write(2)` (inside ``FileWriter`` the name would be ambiguous).
private func systemWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, buffer, count)
}
