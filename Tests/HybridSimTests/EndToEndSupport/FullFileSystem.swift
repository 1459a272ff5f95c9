import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A small tmpfs mounted for one test, for the failures a full disk gives (`ENOSPC`) that no
/// ordinary directory produces on demand. Mounting needs root: ``available`` says whether this
/// process may (tests that need it are skipped otherwise). ``tearDown()`` unmounts it.
final class FullFileSystem {
    /// The mount point.
    let path: String

    /// Whether a tmpfs can be mounted here: root, with `mount` installed.
    static let available: Bool = geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/mount")

    /// Mounts a tmpfs of `kilobytes` KiB (and at most `inodes` files, when given) at a fresh directory.
    init(kilobytes: Int = 64, inodes: Int? = nil) throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("hybridsim-full-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let options = "size=\(kilobytes)k,mode=0700" + (inodes.map { ",nr_inodes=\($0)" } ?? "")
        let mount = try ChildProcess.run("/usr/bin/mount", ["-t", "tmpfs", "-o", options, "tmpfs", path])
        guard mount.status == 0 else {
            try? FileManager.default.removeItem(atPath: path)
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "mount tmpfs at \(path): \(mount.error)"])
        }
    }

    /// Fills the data blocks: from now on a write of one more byte fails with `ENOSPC` (a new,
    /// empty file can still be made, as on a disk whose blocks ran out before its inodes).
    func fill() {
        let fd = open(path + "/filler", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let block = [UInt8](repeating: 0xAA, count: 4096)
        while block.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
    }

    /// Uses up the files too: from now on creating a file fails with `ENOSPC`.
    func fillInodes() {
        var index = 0
        while true {
            let fd = open(path + "/inode-\(index)", O_WRONLY | O_CREAT | O_EXCL, 0o600)
            guard fd >= 0 else { return }
            close(fd)
            index += 1
        }
    }

    /// Makes room again (the filler and the inode files removed), as an operator freeing space.
    func free() {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        where name == "filler" || name.hasPrefix("inode-") {
            unlink(path + "/" + name)
        }
    }

    /// Unmounts it (lazily, should a child still hold a file there) and removes the mount point.
    func tearDown() {
        _ = try? ChildProcess.run("/usr/bin/umount", ["-l", path])
        rmdir(path)
    }
}
