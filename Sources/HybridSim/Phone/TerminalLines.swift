import Foundation
import Synchronization

/// Standard input, one line at a time, for questions asked on the terminal.
///
/// One thread reads standard input for the life of the process (`readLine` blocks, and a blocked
/// read cannot be taken back): a question that timed out or was withdrawn leaves no reader behind
/// to swallow the answer to the next one, as a thread per question would in `phone --listen`.
/// Lines typed ahead answer the next question, as for any terminal program: a script can feed its
/// answers through a pseudo-terminal before the question is asked.
final class TerminalLines: Sendable {
    static let shared = TerminalLines { Swift.readLine(strippingNewline: true) }

    /// Reads one line, blocking (`nil`: the end of input).
    private let read: @Sendable () -> String?

    private struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<String?, Never>
    }

    private struct State {
        var started = false
        var lines: [String] = []
        var ended = false
        var waiter: Waiter?
        var nextID: UInt64 = 0
        /// The newest question whose wait ended (time out, cancelled) before it was registered.
        var abandoned: UInt64 = 0
    }
    private let state = Mutex(State())

    /// Lines from `read`, called on a thread of their own from the first ``next(timeout:)``.
    init(read: @escaping @Sendable () -> String?) {
        self.read = read
    }

    /// The next line (without its line break), or `nil` at the end of input, after `timeout`, or
    /// when the calling task is cancelled. One caller at a time.
    func next(timeout: Duration) async -> String? {
        let id: UInt64 = state.withLock { state in
            state.nextID &+= 1
            return state.nextID
        }
        startReading()
        let timer = Task {
            try? await Task.sleep(for: timeout)
            self.give(nil, to: id)
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
                let now: String?? = state.withLock { state in
                    if !state.lines.isEmpty { return .some(state.lines.removeFirst()) }
                    if state.ended || state.abandoned == id || Task.isCancelled { return .some(nil) }
                    state.waiter = Waiter(id: id, continuation: continuation)
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            self.give(nil, to: id)
        }
    }

    /// Resumes the waiter `id` with `line`, if it still waits (and if it has not started waiting,
    /// makes it return at once).
    private func give(_ line: String?, to id: UInt64) {
        let waiter = state.withLock { state -> Waiter? in
            guard let waiter = state.waiter, waiter.id == id else {
                state.abandoned = max(state.abandoned, id)
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.continuation.resume(returning: line)
    }

    private func startReading() {
        let start = state.withLock { state -> Bool in
            defer { state.started = true }
            return !state.started
        }
        guard start else { return }
        Thread.detachNewThread {
            while let line = self.read() {
                self.deliver(line)
            }
            self.deliver(nil)
        }
    }

    /// A line read (`nil`: the end of input) goes to the waiter, or is kept for the next one.
    private func deliver(_ line: String?) {
        let waiter = state.withLock { state -> Waiter? in
            if line == nil { state.ended = true }
            if let waiter = state.waiter.take() { return waiter }
            if let line { state.lines.append(line) }
            return nil
        }
        waiter?.continuation.resume(returning: line)
    }
}
