import HybridFiles

/// Reads a file the user named (an options file, a recording, a key log) with ``FileReader``, so a
/// failure is worded by the system ("no such file or directory", "permission denied") instead of
/// Foundation's "The operation could not be completed", a directory or an endless file such as
/// `/dev/zero` is refused instead of read, and a pipe that stays quiet (`--options <(sleep 100)`, a
/// named pipe nobody writes to) is an error after ``FileReader/quietLimit`` instead of a wait
/// without end.
///
/// Unlike a store (``AtomicFile/read(path:)``), a symbolic link is followed and a pipe is read (a
/// user may give `--options <(curl …)`).
package enum InputFile {
    /// The largest file read (16 MiB): options, recordings and key logs are far smaller.
    package static let maximumSize = 16 << 20

    /// The whole file at `path`.
    ///
    /// - Throws: ``Failure``: one line without the path (the caller names the file); "it is empty"
    ///   for an empty file unless `allowsEmpty`.
    package static func read(
        _ path: String, maximumSize: Int = maximumSize, quietLimit: Duration = FileReader.quietLimit, allowsEmpty: Bool = false
    ) throws(Failure) -> [UInt8] {
        let bytes: [UInt8]
        do {
            bytes = try FileReader.read(path, maximumSize: maximumSize, quietLimit: quietLimit)  // `-`: standard input
        } catch {
            throw Failure(reason: error.description)
        }
        // No options file, recording or profile is empty: say so, rather than let a parser report an
        // unexpected end (`--options <(true)`, a file truncated by mistake). A key log may be: a
        // ceremony that failed before its handshake logged nothing, and its recording still shows.
        guard !bytes.isEmpty || allowsEmpty else { throw Failure(reason: "it is empty") }
        return bytes
    }

    /// Why a file could not be read.
    package struct Failure: Error, CustomStringConvertible {
        /// The reason, lower case, e.g. `no such file or directory`.
        package let reason: String
        package var description: String { reason }
    }
}
