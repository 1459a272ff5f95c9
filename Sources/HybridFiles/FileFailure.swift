#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a ``FileReader`` read or a ``FileWriter`` write failed. The description is one lower-case
/// line without the path (the caller names the file): `no such file or directory`, `it is a
/// directory`, `larger than 16 MiB`, …
package enum FileFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// A system call failed with this `errno`.
    case system(Int32)
    /// The path names a directory.
    case directory
    /// The directory a new file would go in does not exist.
    case noDirectory(String)
    /// More than `maximumSize` bytes came.
    case tooLarge(maximumSize: Int)
    /// A pipe or device sent neither data nor its end for this long.
    case quiet(Duration)
    /// A named pipe with nobody reading it (`ENXIO` from a non-blocking open for writing).
    case noReader
    /// Standard input, asked for with `-`, is a terminal: the data was meant to be piped in.
    case terminal
    /// A pipe or device owned by another user (not this one, not root): what is written there is
    /// theirs to read (a named pipe planted in `/tmp` where a file was meant).
    case foreignOwner(kind: String, uid: UInt32)
    /// A regular file another user owns in a sticky directory (`/tmp`), which the system does not
    /// let this user replace.
    case othersFile(uid: UInt32)

    package var description: String {
        switch self {
        case .system(let code): return String(cString: strerror(code)).lowercased()
        case .directory: return "it is a directory"
        case .noDirectory(let directory): return "the directory \(directory) does not exist"
        case .tooLarge(let maximumSize):
            return maximumSize % (1 << 20) == 0 ? "larger than \(maximumSize >> 20) MiB" : "larger than \(maximumSize) bytes"
        case .quiet(let limit): return "no data for \(Self.words(limit)) (a pipe or device nobody writes to?)"
        case .noReader: return "a named pipe nobody reads"
        case .terminal: return "standard input is a terminal; pipe or redirect the data in (… | hybrid-sim … -)"
        case .foreignOwner(let kind, let uid):
            return "it is a \(kind) owned by another user (uid \(uid)), who would read what is written; nothing was written"
        case .othersFile(let uid):
            return "it is a file of another user (uid \(uid)) in a sticky directory (such as /tmp), which only they may replace; choose another name"
        }
    }

    private static func words(_ limit: Duration) -> String {
        let milliseconds = Self.milliseconds(limit)
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
    }

    /// `limit` in whole milliseconds for `poll`: 0 for a negative limit (which `poll` would take
    /// as "wait forever"), at most `Int32.max` (about 24 days).
    package static func milliseconds(_ limit: Duration) -> Int32 {
        let (seconds, attoseconds) = limit.components
        guard seconds >= 0, attoseconds >= 0 else { return 0 }
        guard seconds < Int64(Int32.max) / 1000 else { return Int32.max }
        return Int32(seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }
}
