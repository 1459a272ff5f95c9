import Foundation
import HybridFiles
import Synchronization

/// A child process whose stdout and stderr arrive as lines, with a bounded wait for its exit.
/// Used by `hybrid-sim demo` to run the desktop and the phone as separate programs.
final class ChildProcess: Sendable {
    /// A line from one of the child's output streams.
    enum Line: Sendable {
        case standardOutput(String)
        case standardError(String)
    }

    private let process: ChildSpawn
    private let exitStatus = StatusBox()

    /// How a child ended: with an exit status, or killed by a signal (which Foundation reports as
    /// the signal's number in the same field, so "exited 9" and "killed by SIGKILL" must be told apart).
    enum Ending: Sendable, Equatable, CustomStringConvertible {
        case exited(Int32)
        case killed(signal: Int32)

        /// The status the demo itself exits with when this ending stopped it: a child's own status
        /// (the table in Docs/CLI.md), 1 ("anything else") for a child that was killed.
        var demoStatus: Int32 {
            switch self {
            case .exited(let status): return status
            case .killed: return 1
            }
        }

        var isSuccess: Bool { self == .exited(0) }

        /// "exited 2", or "was killed by signal 9 (SIGKILL)".
        var description: String {
            switch self {
            case .exited(let status): return "exited \(status)"
            case .killed(let signal): return "was killed by signal \(signal)\(SignalRouter.knownName(signal).map { " (\($0))" } ?? "")"
            }
        }
    }

    /// Every line the child writes, in arrival order per stream.
    let lines: AsyncStream<Line>

    /// Starts `executable` with `arguments` and `environment` added to this process's environment.
    init(executable: String, arguments: [String], environment: [String: String]) throws {
        let out = Pipe()
        let err = Pipe()
        let (stream, continuation) = AsyncStream<Line>.makeStream()
        let open = Mutex(2)
        var flushes: [@Sendable () -> Void] = []
        for (pipe, wrap) in [(out, Line.standardOutput), (err, Line.standardError)] {
            let buffer = Mutex<[UInt8]>([])
            let flush: @Sendable () -> Void = {
                let rest = buffer.withLock { bytes -> [UInt8] in defer { bytes = [] }; return bytes }
                if !rest.isEmpty { continuation.yield(wrap(String(decoding: rest, as: UTF8.self))) }
            }
            flushes.append(flush)
            // A blocking read loop on a thread of its own instead of `readabilityHandler`: no
            // libdispatch read source (epoll muxnote) exists for the pipe, so there is none to tear
            // down while the descriptor closes.
            let handle = pipe.fileHandleForReading
            Thread.detachNewThread {
                var chunk = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = chunk.withUnsafeMutableBytes { read(handle.fileDescriptor, $0.baseAddress, $0.count) }
                    if count < 0, errno == EINTR { continue }
                    guard count > 0 else { break }
                    let complete = buffer.withLock { bytes -> [[UInt8]] in
                        bytes += chunk[..<count]
                        var lines: [[UInt8]] = []
                        while let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) {
                            lines.append(Array(bytes[..<newline]))
                            bytes.removeSubrange(...newline)
                        }
                        return lines
                    }
                    for line in complete { continuation.yield(wrap(String(decoding: line, as: UTF8.self))) }
                }
                flush()
                if open.withLock({ count -> Int in count -= 1; return count }) == 0 { continuation.finish() }
            }
        }
        let status = exitStatus
        let flushAll = flushes
        let ended: @Sendable (ChildSpawn.Ending) -> Void = { end in
            let ending: Ending
            switch end {
            case .exited(let code): ending = .exited(code)
            case .killed(let signal): ending = .killed(signal: signal)
            case .unknown: ending = .exited(1)  // its end could not be learned: "anything else"
            }
            status.value.withLock { $0 = ending }
            // Every wait is bounded: if a pipe never reaches its end after the child exited (its write
            // end inherited by another process), the lines end 2 s later (its reading thread stays
            // blocked until that process closes it; what it reads then is dropped).
            DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(2)) {
                guard open.withLock({ $0 > 0 }) else { return }
                for flush in flushAll { flush() }
                continuation.finish()
            }
        }
        // Stopped with the demo when a signal ends it. Started with posix_spawn, not Foundation's
        // Process (`ChildSpawn` says why); the pipes' child ends are closed here once it runs.
        defer {
            try? out.fileHandleForWriting.close()
            try? err.fileHandleForWriting.close()
        }
        let process = try RunningChildren.spawn {
            try ChildSpawn(
                executable: executable, arguments: arguments,
                environment: ProcessInfo.processInfo.environment.merging(environment) { _, new in new },
                input: nil, output: out.fileHandleForWriting.fileDescriptor, error: err.fileHandleForWriting.fileDescriptor)
        }
        process.onEnd(ended)
        self.process = process
        self.lines = stream
    }

    /// How the child ended, once it has.
    var status: Ending? { exitStatus.value.withLock { $0 } }

    /// Waits up to `timeout` for the child to exit; on timeout stops it (``end()``: SIGTERM, then
    /// SIGKILL) and returns `nil`.
    func waitForExit(timeout: Duration) async -> Ending? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status { return status }
            try? await Task.sleep(for: .milliseconds(20))
        }
        await end()
        return nil
    }

    /// Stops the child: SIGTERM, and SIGKILL if it still runs 2 s later (a hung program, or one
    /// that ignores SIGTERM), so its pipes close and a read of ``lines`` ends. The 2 s are given
    /// in full even when the calling task is cancelled. Returns whether the child was running.
    @discardableResult
    func end() async -> Bool {
        guard terminate() else { return false }
        let process = self.process
        await Task.detached {
            let deadline = ContinuousClock.now + .seconds(2)
            while process.isRunning, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
            process.signal(SIGKILL)
        }.value
        return true
    }

    /// Watches this child and stops `other` (SIGTERM) as soon as this one exits with a status
    /// `stops` accepts, so a demo whose phone failed does not wait out its desktop's timeout.
    /// Cancel the task once `other` has ended. Its value: this child's status, if it ended first,
    /// and whether that stopped `other` (it was still running).
    func watch(
        stopping other: ChildProcess, when stops: @escaping @Sendable (Ending) -> Bool
    ) -> Task<(status: Ending, stoppedOther: Bool)?, Never> {
        Task {
            while !Task.isCancelled {
                if let status {
                    return (status, stops(status) && other.terminate())
                }
                try? await Task.sleep(for: .milliseconds(20))
            }
            return nil
        }
    }

    /// Stops the child (SIGTERM) if it is still running; returns whether it was.
    @discardableResult
    func terminate() -> Bool {
        guard process.isRunning else { return false }
        process.signal(SIGTERM)
        return true
    }

    /// Stops the child (``end()``) at `deadline` unless the task is cancelled first. Its pipes
    /// close as it ends, so a read of ``lines`` cannot outlast `deadline` (plus ``end()``'s 2 s,
    /// and the 2 s after an exit that a pipe held by another process gets), however silent the
    /// child. The task's value: whether it stopped the child.
    func stop(at deadline: ContinuousClock.Instant) -> Task<Bool, Never> {
        Task {
            do { try await Task.sleep(until: deadline) } catch { return false }
            return await end()
        }
    }
}

/// The exit status, shared with the termination handler.
private final class StatusBox: Sendable {
    let value = Mutex<ChildProcess.Ending?>(nil)
}
