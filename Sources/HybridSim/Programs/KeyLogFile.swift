#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HybridCore
import HybridFiles

/// `--keylog FILE` on the desktop and the phone: appends each session's ``SessionKeys/keyLogLine``
/// to `FILE` (created with mode 0600; like TLS's `SSLKEYLOGFILE`, anyone holding it can decrypt the
/// recorded sessions). `hybrid-sim inspect --keylog FILE` reads it (Docs/INSPECT.md).
struct KeyLogFile: Sendable {
    let path: String
    /// How each line is appended: never through a symbolic link (a regular file, or none yet, must
    /// not become a link to someone's file), except the link to a pipe or device accepted at start
    /// (`/dev/stderr`).
    private let appendFlags: Int32
    /// The program's own descriptor the path names (`--keylog /dev/stderr` with stderr redirected):
    /// lines go through it, sharing its offset with what the program writes there. Reopening the
    /// path would give a description of its own, and a line written through it is overwritten by
    /// the stream's next write when the shell opened the file without O_APPEND (`2> keys.log`).
    private let ownDescriptor: Int32?
    /// For a path that is a link: the pipe or device it led to at start (device and inode). Each
    /// append writes only there: a link swapped meanwhile for one to a file of this user's, which
    /// others may read, would take the keys (the owner check cannot see that).
    private let linkTarget: [UInt64]?

    /// Checks that `path` can be opened for appending, so a bad path fails before the ceremony, and
    /// sets a regular file's mode to 0600: an existing file that others could read would leak the
    /// keys. A pipe or device (`/dev/stderr`, a named pipe with a reader) is used as it is: its mode
    /// is not the key log's to change (`/dev/null` made 0600 would break every other user's programs).
    init(path: String) throws(ProgramFailure) {
        self.path = path
        self.ownDescriptor = FileWriter.ownDescriptor(path)
        let isLink = FileReader.isSymbolicLink(path)
        self.appendFlags = isLink ? O_WRONLY | O_APPEND : O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW
        let fd: Int32
        do {
            // With the flags of every later append: a link is opened without creating anything
            // where it points (a dangling link planted in /tmp must not make the victim's file),
            // and a path that is no link stays none (`O_NOFOLLOW`: one swapped in is refused).
            fd = try FileWriter.openForWriting(path, flags: appendFlags)
        } catch {
            throw ProgramFailure(.badInput, "--keylog \(path): cannot open for appending (\(error))")
        }
        defer { close(fd) }
        do {
            if ownDescriptor == nil { try FileWriter.checkOwner(of: fd) }
        } catch {
            throw ProgramFailure(.badInput, "--keylog \(path): \(error)")
        }
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            throw ProgramFailure(.badInput, "--keylog \(path): \(String(cString: strerror(errno)))")
        }
        self.linkTarget = isLink ? [UInt64(status.st_dev), UInt64(status.st_ino)] : nil
        guard status.st_mode & S_IFMT == S_IFREG else { return }
        // `/dev/stderr` redirected to a file (`2> keys.log`): the user's own stream, which the
        // shell opened; neither someone else's file nor ours to change the mode of.
        if ownDescriptor != nil { return }
        if isLink {
            // A link in a shared directory (/tmp) could send the keys into someone's file and make
            // it 0600; a link to a pipe or device (/dev/stderr) is fine, and is returned above.
            throw ProgramFailure(
                .badInput, "--keylog \(path) is a symbolic link to a regular file: give the file itself (the stores refuse links too)")
        }
        guard fchmod(fd, 0o600) == 0 else {
            throw ProgramFailure(.badInput, "--keylog \(path): cannot set mode 0600 (\(String(cString: strerror(errno))))")
        }
    }

    /// The session's key-log hook: appends one line per completed handshake. A write failure is
    /// reported on stderr and does not stop the ceremony.
    var hook: @Sendable (SessionKeys) -> Void {
        let (path, flags, own, target) = (self.path, appendFlags, ownDescriptor, linkTarget)
        return { keys in
            let line = Array((keys.keyLogLine + "\n").utf8)
            if let own {
                let written = line.withUnsafeBytes { write(own, $0.baseAddress, $0.count) }
                if written != line.count {
                    StandardStream.errorLine(
                        "note: could not append to the key log \(path) (\(written < 0 ? String(cString: strerror(errno)).lowercased() : "a short write")); this session's keys are not recorded")
                }
                return
            }
            var fd = (try? FileWriter.openForWriting(path, flags: flags, blocking: false)) ?? -1
            var opened = stat()
            if fd >= 0, (try? FileWriter.checkOwner(of: fd)) == nil
                || (target != nil && (fstat(fd, &opened) != 0 || [UInt64(opened.st_dev), UInt64(opened.st_ino)] != target))
            {
                // Another user's pipe, or another file, swapped in behind the path accepted at start.
                close(fd)
                fd = -1
                errno = EPERM
            }
            // One write(2) of one short line with O_APPEND: lines from a desktop and a phone sharing
            // the file do not interleave. Non-blocking: a pipe whose reader left is a warning, not a hang.
            let written = fd >= 0 ? line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } : -1
            let reason = written < 0 ? String(cString: strerror(errno)).lowercased() : "a short write"
            if fd >= 0 { close(fd) }
            if written != line.count {
                StandardStream.errorLine(
                    "note: could not append to the key log \(path) (\(reason)); this session's keys are not recorded")
            }
        }
    }

    /// The hook for an optional path.
    static func hook(path: String?) throws(ProgramFailure) -> (@Sendable (SessionKeys) -> Void)? {
        guard let path else { return nil }
        return try KeyLogFile(path: path).hook
    }
}
