#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
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
///
/// Standard error is **queued**: its lines come from every thread (log lines from SwiftNIO's event
/// loops, the signal path), and a reader that stops reading (a terminal paused with Ctrl-S, a pager
/// not scrolled, a stalled log collector) would otherwise stop each of them in `write(2)` once the
/// pipe is full: a relay then answered nobody and ignored SIGTERM. One writer thread writes them
/// in order; up to ``queueLimit`` bytes wait for the reader, later lines are dropped and counted,
/// and once the reader reads again a note says how many. ``drain(timeout:)`` waits for the queue
/// before the process ends (at `exit`, and before the programs' own `_exit`).
package final class StandardStream: Sendable {
    /// File descriptor 1.
    package static let output = StandardStream(descriptor: 1, follows: error)
    /// File descriptor 2, queued (see the type's documentation).
    package static let error = StandardStream(descriptor: 2, queued: true)

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
    /// The writer of a queued stream (standard error), `nil` for one written at once.
    private let writer: DispatchQueue?
    /// Bytes handed to the writer and not yet written.
    private let queued = Atomic<Int>(0)
    /// Lines dropped since the writer last said so: the queue was full.
    private let dropped = Atomic<Int>(0)

    /// The most bytes a queued stream holds for a reader that does not read: 1 MiB (a relay's log
    /// lines for about 8,000 connections).
    package static let queueLimit = 1 << 20
    private let queueLimit: Int
    /// The queued stream whose lines this one lets go first (standard output: standard error's).
    private let follows: StandardStream?

    /// A stream on `descriptor`; `queued`: written by a writer thread, holding at most `queueLimit`
    /// bytes; `follows`: a queued stream whose pending lines a write here waits for (at most 100 ms).
    init(descriptor: Int32, queued: Bool = false, queueLimit: Int = StandardStream.queueLimit, follows: StandardStream? = nil) {
        self.descriptor = descriptor
        self.queueLimit = queueLimit
        self.follows = follows
        writer = queued ? DispatchQueue(label: "hybrid-sim.standard-stream.\(descriptor)") : nil
    }

    /// The first failed write's reason, or `nil` while every write succeeded.
    package var failure: FileFailure? { state.withLock { $0.failure } }

    /// Writes all of `text`. Lines written from several threads do not interleave (one lock,
    /// held for the write). On a queued stream `text` is handed to the writer and this returns at
    /// once: `.written` when it was queued (or `.failed` once, for an earlier write that failed), and
    /// `.dropped` when the queue is full or the stream has failed.
    @discardableResult
    package func write(_ text: String) -> Outcome {
        guard let writer else {
            // Written at once (standard output): what standard error still queues goes first, as it
            // was written first (a progress line would otherwise land inside the QR code when both
            // streams go to one terminal), waiting at most 100 ms for a reader that does not read.
            follows?.settle()
            return writeNow(text)
        }
        if let failure = state.withLock({ state -> Outcome? in
            guard let failure = state.failure else { return nil }
            guard state.reported else {
                state.reported = true
                return .failed(failure)
            }
            return .dropped
        }) {
            return failure
        }
        let size = text.utf8.count
        guard queued.add(size, ordering: .relaxed).newValue <= queueLimit else {
            queued.subtract(size, ordering: .relaxed)
            dropped.add(1, ordering: .relaxed)
            return .dropped
        }
        // Lines dropped since the last one queued: the note goes where they would have been.
        let lost = dropped.exchange(0, ordering: .relaxed)
        writer.async { [self] in
            writeDroppedNote(lost)
            writeNow(text)
            queued.subtract(size, ordering: .relaxed)
        }
        return .written
    }

    /// On the writer: says that `lost` lines were dropped, if any.
    private func writeDroppedNote(_ lost: Int) {
        guard lost > 0 else { return }
        writeNow("note: \(lost) line(s) were dropped here: this stream was not being read and \(queueLimit) bytes waited\n")
    }

    /// Waits until what was queued before this call is written, at most `timeout` (the process is
    /// ending: a reader that does not read must not hold it for ever). Returns at once on a stream
    /// that is not queued.
    package func drain(timeout: Duration = .seconds(10)) {
        guard let writer else { return }
        let done = DispatchSemaphore(value: 0)
        let lost = dropped.exchange(0, ordering: .relaxed)
        writer.async { [self] in
            writeDroppedNote(lost)
            done.signal()
        }
        let (seconds, attoseconds) = timeout.components
        _ = done.wait(timeout: .now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)))
    }

    /// ``drain(timeout:)`` for at most 100 ms, when anything is queued (nothing to wait for otherwise).
    func settle() {
        guard writer != nil, queued.load(ordering: .relaxed) > 0 || dropped.load(ordering: .relaxed) > 0 else { return }
        drain(timeout: .milliseconds(100))
    }

    /// Writes `text` now, on the calling thread (a queued stream's: its writer).
    @discardableResult
    private func writeNow(_ text: String) -> Outcome {
        if writer != nil {
            // Only the writer writes a queued stream, so nothing interleaves; the lock is not held
            // across `write(2)`, which blocks while the reader does not read, and every ``write(_:)``
            // takes it.
            guard state.withLock({ $0.failure }) == nil else { return .dropped }
            do throws(FileFailure) {
                try FileWriter.writeAll(Array(text.utf8), to: descriptor)
                return .written
            } catch {
                // Handed back by the next ``write(_:)``.
                state.withLock { $0 = (error, false) }
                return .failed(error)
            }
        }
        return state.withLock { state in
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
        // Whatever standard error still queues is written before the process exits (`exit`, or
        // returning from `main`; the programs' `_exit` paths drain first themselves).
        atexit { StandardStream.error.drain() }
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
