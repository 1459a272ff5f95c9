import Foundation
import Synchronization

/// The one scratch directory of a process running the targets that read or save real files (the
/// stores, `rp`'s service): `$TMPDIR/hybrid-fuzz-<pid>`, made at its first use and removed, with
/// everything in it, when the process exits (`atexit`: a normal `exit` or the end of `main`, as
/// `hybrid-fuzz` and the test runner end). Made once, not per input, so the targets run no slower.
package enum FuzzScratch {
    /// Whether this process made its directory (so removing it creates nothing).
    private static let made = Atomic<Bool>(false)

    /// The directory, made at the first use; its removal at exit is registered then.
    static let directory: String = {
        let path = NSTemporaryDirectory() + "hybrid-fuzz-\(getpid())"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        made.store(true, ordering: .sequentiallyConsistent)
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
