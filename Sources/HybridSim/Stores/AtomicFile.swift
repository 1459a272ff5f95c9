import Foundation
import HybridFiles

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where a test can make ``AtomicFile/write(_:to:simulatingCrash:)`` stop as if the process died.
package enum SimulatedCrash: Sendable, CaseIterable {
    /// Half of the bytes reached the temporary file.
    case afterPartialWrite
    /// The temporary file is complete and synced, but not yet renamed over the target.
    case beforeRename
}

/// Whole-file reads and crash-safe replacement of small files (the stores).
///
/// A write never leaves a half-written target: the bytes go to a new temporary file in the same
/// directory (`.<name>.tmp-<pid>-<random>`, created `O_EXCL` with mode 0600), which is fsynced,
/// renamed over the target (atomic on POSIX file systems), and then the directory is fsynced so the
/// rename itself survives a power cut. A crash at any point leaves either the old file or the new
/// one, plus at most a stray temporary file, which readers never look at and later writes remove
/// once it is ten minutes old.
enum AtomicFile {
    /// Files larger than this are refused when read (the stores are a few kilobytes).
    static let maximumSize = 16 << 20
    /// How old a stray temporary file must be before a write removes it.
    static let staleTemporaryAge: TimeInterval = 600

    /// Reads a whole regular file; `nil` when it (or its directory) does not exist.
    static func read(path: String) throws(StoreError) -> [UInt8]? {
        // O_NONBLOCK: a FIFO at the path must not hang the program; it is refused below.
        // O_NOFOLLOW: a symlink planted at the store path is refused, not followed.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT { return nil }
            if code == ELOOP, FileReader.isSymbolicLink(path) {
                throw StoreError(
                    .unreadable, path: path,
                    "is a symbolic link, which is not followed: give the path of the file it points to, or put that file in its place")
            }
            throw StoreError(.unreadable, path: path, systemMessage(code), systemError: code)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let code = errno
            throw StoreError(.unreadable, path: path, systemMessage(code), systemError: code)
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw StoreError(.unreadable, path: path, "not a regular file")
        }
        guard Int(info.st_size) <= maximumSize else {
            throw StoreError(
                .unreadable, path: path, "\(info.st_size) bytes is more than the \(maximumSize) a store may have")
        }
        do {
            return try FileReader.readToEnd(fd, maximumSize: maximumSize)
        } catch {
            switch error {
            case .tooLarge:
                throw StoreError(.unreadable, path: path, "the file grew past \(maximumSize) bytes while being read")
            case .system(let code):
                throw StoreError(.unreadable, path: path, systemMessage(code), systemError: code)
            default:  // a directory, a quiet pipe: not for a regular file read without a quiet limit
                throw StoreError(.unreadable, path: path, error.description)
            }
        }
    }

    /// Replaces `path` with `bytes` atomically, mode 0600; creates a missing directory with mode 0700
    /// (`createsDirectory: false`: a missing directory is an error instead).
    static func write(
        _ bytes: [UInt8], to path: String, createsDirectory: Bool = true, simulatingCrash crash: SimulatedCrash? = nil,
        directorySyncError: Int32? = nil
    ) throws(StoreError) {
        // What could not be read back is not written: the file keeps its previous content and
        // stays usable (a store grown past the limit would refuse every later read).
        guard bytes.count <= maximumSize else {
            throw StoreError(
                .writeFailed, path: path,
                "it would be \(bytes.count) bytes, more than the \(maximumSize) a store may have; the file keeps its previous content")
        }
        let (directory, name) = try components(of: path)
        try ensureDirectory(directory, for: path, creating: createsDirectory)
        let temporary =
            directory + "/" + temporaryPrefix(for: name)
            + "\(getpid())-\(String(UInt64.random(in: .min ... .max), radix: 16))"

        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let code = errno
            throw StoreError(.writeFailed, path: path, "cannot create \(temporary): \(systemMessage(code))", systemError: code)
        }
        var renamed = false
        var isOpen = true
        defer {
            if isOpen { close(fd) }
            if !renamed, crash == nil { unlink(temporary) }
        }
        func fail(_ step: String) -> StoreError {
            let code = errno
            return StoreError(.writeFailed, path: path, "\(step) \(temporary): \(systemMessage(code))", systemError: code)
        }
        guard fchmod(fd, 0o600) == 0 else { throw fail("cannot set mode 0600 on") }
        if crash == .afterPartialWrite {
            try writeAll(Array(bytes.prefix(bytes.count / 2)), to: fd, path: path)
            throw StoreError(.writeFailed, path: path, "simulated crash after a partial write")
        }
        try writeAll(bytes, to: fd, path: path)
        guard fsync(fd) == 0 else { throw fail("cannot fsync") }
        isOpen = false
        guard close(fd) == 0 else { throw fail("cannot close") }
        if crash == .beforeRename {
            throw StoreError(.writeFailed, path: path, "simulated crash before the rename")
        }
        guard rename(temporary, path) == 0 else {
            let code = errno
            throw StoreError(
                .writeFailed, path: path, "cannot rename \(temporary) to \(path): \(systemMessage(code))", systemError: code)
        }
        renamed = true
        try syncDirectory(directory, for: path, simulatedError: directorySyncError)
        removeStaleTemporaryFiles(for: path)
    }

    /// Whether `path` can name a store file: not empty, and not a directory's name (ending in `/`,
    /// or a last component `.` or `..`).
    static func namesFile(_ path: String) -> Bool {
        guard !path.isEmpty, !path.hasSuffix("/") else { return false }
        let last = path.split(separator: "/").last ?? ""
        return last != "." && last != ".."
    }

    /// The directory and the file name of the store file `path` (a relative path's directory is
    /// `.`, never a path derived from the working directory).
    /// - Throws: ``StoreError`` `writeFailed` for a path that names no file (``namesFile(_:)``).
    static func components(of path: String) throws(StoreError) -> (directory: String, name: String) {
        guard namesFile(path) else {
            throw StoreError(
                .writeFailed, path: path, "\(path.isEmpty ? "an empty path" : "a directory's path") names no store file")
        }
        let directory = (path as NSString).deletingLastPathComponent
        return (directory.isEmpty ? "." : directory, (path as NSString).lastPathComponent)
    }

    /// The name prefix of temporary files for a target named `name`.
    static func temporaryPrefix(for name: String) -> String { ".\(name).tmp-" }

    /// Creates `directory` (and missing parents) with mode 0700 unless it exists (`creating: false`:
    /// a missing directory is an error instead).
    static func ensureDirectory(_ directory: String, for path: String, creating: Bool = true) throws(StoreError) {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw StoreError(.directoryFailed, path: path, "\(directory) is not a directory")
            }
            return
        }
        guard creating else {
            // Not a failure to create it: it was not to be created.
            throw StoreError(.writeFailed, path: path, "its directory \(directory) does not exist (it is not made again)")
        }
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            let underlying = (error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError
            let code = underlying?.domain == NSPOSIXErrorDomain ? underlying.map { Int32($0.code) } : nil
            throw StoreError(.directoryFailed, path: path, "\(directory): \(error.localizedDescription)", systemError: code)
        }
    }

    private static func writeAll(_ bytes: [UInt8], to fd: Int32, path: String) throws(StoreError) {
        do {
            try FileWriter.writeAll(bytes, to: fd)
        } catch {
            let code: Int32? = if case .system(let code) = error { code } else { nil }
            throw StoreError(.writeFailed, path: path, "write failed: \(error)", systemError: code)
        }
    }

    /// fsyncs a directory so a rename in it is durable. A file system that cannot sync directories
    /// (`EINVAL`, `ENOTSUP`) is accepted; any other failure (`EIO`) is reported: the new file is in
    /// place but may not survive a power cut.
    /// `simulatedError`: tests make the directory's fsync fail with that errno.
    private static func syncDirectory(_ directory: String, for path: String, simulatedError: Int32? = nil)
        throws(StoreError)
    {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            throw StoreError(
                .writeFailed, path: path, "cannot open \(directory) to sync it: \(systemMessage(code))", systemError: code)
        }
        defer { close(fd) }
        guard simulatedError == nil, fsync(fd) == 0 else {
            let code = simulatedError ?? errno
            if code == EINVAL || code == ENOTSUP || code == EROFS { return }
            throw StoreError(.writeFailed, path: path, "cannot fsync \(directory): \(systemMessage(code))", systemError: code)
        }
    }

    /// Removes temporary files of earlier, crashed writes to `path` once they are stale.
    private static func removeStaleTemporaryFiles(for path: String, now: Date = Date()) {
        guard let (directory, name) = try? components(of: path) else { return }
        let prefix = temporaryPrefix(for: name)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        for name in names where name.hasPrefix(prefix) {
            let candidate = directory + "/" + name
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: candidate),
                let modified = attributes[.modificationDate] as? Date,
                now.timeIntervalSince(modified) > staleTemporaryAge
            else { continue }
            unlink(candidate)
        }
    }

    static func systemMessage(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}


/// Test access to a store write whose directory fsync fails with a chosen errno (the failure a real
/// disk reports as `EIO`), which no file system here produces on demand.
package enum AtomicFileFaults {
    /// ``AtomicFile`` write of `bytes` to `path` whose final directory fsync fails with `errno`.
    package static func write(_ bytes: [UInt8], to path: String, directorySyncErrno errno: Int32) throws(StoreError) {
        try AtomicFile.write(bytes, to: path, directorySyncError: errno)
    }
}
