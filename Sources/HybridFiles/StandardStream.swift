#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// The process's standard output or standard error, written with `write(2)` (no stdio buffer: a
/// reader of a pipe sees each line at once).
///
/// A write that fails does not stop the program: the reader of a pipe went away (`EPIPE`, as in
/// `hybrid-sim desktop | grep -m1 FIDO:/`), the disk is full (`ENOSPC`), the descriptor is closed
/// (`EBADF`). The stream is not written again, and the first failure is handed back once so the
/// caller can say so where it still can. (Foundation's `FileHandle.write` traps on these errors,
/// which crashed a desktop after its sign-in was verified.) A program that exists to print its
/// result checks ``failure`` and fails instead (``resultWritten()``).
package final class StandardStream: Sendable {
    /// File descriptor 1.
    package static let output = StandardStream(descriptor: 1)
    /// File descriptor 2.
    package static let error = StandardStream(descriptor: 2)

    /// What became of one ``write(_:)``.
    package enum Outcome: Equatable {
        /// All of it was written.
        case written
        /// This write failed, the stream's first failure; nothing more will be written.
        case failed(FileFailure)
        /// Not written: an earlier write failed.
        case dropped
    }

    private let descriptor: Int32
    /// The first failure, and whether a ``write(_:)`` has handed it back yet.
    private let state = Mutex<(failure: FileFailure?, reported: Bool)>((nil, false))

    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// The first failed write's reason, or `nil` while every write succeeded.
    package var failure: FileFailure? { state.withLock { $0.failure } }

    /// Writes all of `text`. Lines written from several threads do not interleave (one lock,
    /// held for the write).
    @discardableResult
    package func write(_ text: String) -> Outcome {
        state.withLock { state in
            if let failure = state.failure {
                guard state.reported else {
                    state.reported = true
                    return .failed(failure)
                }
                return .dropped
            }
            do throws(FileFailure) {
                try FileWriter.writeAll(Array(text.utf8), to: descriptor)
                return .written
            } catch {
                state = (error, true)
                return .failed(error)
            }
        }
    }

    /// Call first thing in `main`: a standard descriptor (0, 1, 2) the program was started without
    /// (`hybrid-sim … >&-`) is opened on `/dev/null`, so the next file or socket the program
    /// opens does not become "standard output" and receive its lines; a closed 1 or 2 counts as
    /// that stream's failure (`bad file descriptor`), reported by its first write.
    package static func claimClosedDescriptors() {
        for descriptor: Int32 in [0, 1, 2] where fcntl(descriptor, F_GETFD) < 0 && errno == EBADF {
            let opened = open("/dev/null", O_RDWR)
            if opened >= 0, opened != descriptor {
                dup2(opened, descriptor)
                close(opened)
            }
            let stream = descriptor == 1 ? output : descriptor == 2 ? error : nil
            stream?.state.withLock { $0 = (.system(EBADF), false) }
        }
    }

    /// Writes `line` and a newline to standard output; on its first failure, a note on standard
    /// error says that the rest of standard output is dropped and the run goes on (the program's
    /// exit status still tells its outcome).
    package static func outputLine(_ line: String) {
        if case .failed(let why) = output.write(line + "\n") {
            error.write("note: cannot write standard output (\(why)); its remaining lines are dropped, the run goes on\n")
        }
    }

    /// Writes `line` and a newline to standard error (a failure is dropped: there is nowhere left
    /// to say it).
    package static func errorLine(_ line: String) {
        error.write(line + "\n")
    }

    /// For a command whose output is its result (`qr show`, `bench --json`): `nil` when standard
    /// output took everything, else the message to fail with.
    package static func resultWritten() -> String? {
        output.failure.map { "cannot write the result to standard output: \($0)" }
    }
}
