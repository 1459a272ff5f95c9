import Foundation
import Synchronization

/// The one scratch directory of a process running the targets that read or save real files (the
/// stores, `rp`'s service): `$TMPDIR/hybrid-fuzz-XXXXXX`, a new directory of mode 0700 that
/// `mkdtemp` names, made at its first use and removed, with everything in it, when the process exits
/// (`atexit`: a normal `exit` or the end of `main`, as `hybrid-fuzz` and the test runner end). Made
/// once, not per input, so the targets run no slower. Until 2026-11-28 it was
/// `$TMPDIR/hybrid-fuzz-<pid>`, and one that another user had made there in advance was used (and
/// the store files, private keys among them, written into it).
package enum FuzzScratch {
    /// Whether this process made its directory (so removing it creates nothing).
    private static let made = Atomic<Bool>(false)

    /// The directory, made at the first use; its removal at exit is registered then. One that
    /// cannot be made ends the process, exit 1, with a line on standard error saying why: the file
    /// targets would otherwise fail on every input without a word.
    package static let directory: String = {
        var template = Array((NSTemporaryDirectory() + "hybrid-fuzz-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            let reason = String(cString: strerror(errno))
            FileHandle.standardError.write(Data("hybrid-fuzz: cannot make a scratch directory in \(NSTemporaryDirectory()): \(reason)\n".utf8))
            exit(1)
        }
        let path = String(cString: made)
        FuzzScratch.made.store(true, ordering: .sequentiallyConsistent)
        atexit { FuzzScratch.remove() }
        return path
    }()

    /// The subdirectory `name` of ``directory``, made if missing.
    static func subdirectory(_ name: String) -> String {
        let path = directory + "/" + name
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Removes the directory and everything in it, if this process made it. Runs at exit;
    /// `hybrid-fuzz` also calls it before it aborts on a violation, which skips `atexit`.
    package static func remove() {
        guard made.exchange(false, ordering: .sequentiallyConsistent) else { return }
        try? FileManager.default.removeItem(atPath: directory)
    }
}
