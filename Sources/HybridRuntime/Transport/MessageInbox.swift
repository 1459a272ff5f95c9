import NIOCore
import Synchronization

/// A thread-safe FIFO of received items with one waiting reader, a terminal error, and timeouts.
///
/// Producers (an event loop, or the other end of an in-memory tunnel) call ``push(_:)`` and
/// ``finish(_:)``; one consumer at a time awaits ``next(timeout:operation:)``. Items pushed before
/// ``finish(_:)`` are still delivered; after them the terminal error is thrown forever.
final class MessageInbox<Element: Sendable>: Sendable {
    private struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<Element, any Error>
        var timer: DeadlineTimer
    }

    private struct State {
        var items = CircularBuffer<Element>()
        var terminal: RuntimeError?
        var waiter: Waiter?
        var nextWaiterID: UInt64 = 0
        /// Callers of ``readerIsWaiting()``, resumed when a reader starts waiting or the inbox finishes.
        var readerWatchers: [CheckedContinuation<Void, Never>] = []
        /// Callers of ``awaitInput()``, by id, resumed when an item arrives or the inbox finishes.
        var inputWatchers: [UInt64: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Mutex(State())
    private let timerLoop: EventLoop?
    /// When the other end was last heard from (``heard()``), in `NIODeadline` uptime nanoseconds.
    private let lastHeard = Atomic<UInt64>(NIODeadline.now().uptimeNanoseconds)

    /// An empty inbox; receive timeouts run on `timerLoop` when given (a WebSocket tunnel passes a
    /// loop of its group), otherwise on a sleeping task.
    init(timerLoop: EventLoop? = nil) {
        self.timerLoop = timerLoop
    }

    /// Adds an item; dropped silently once the inbox is finished.
    func push(_ item: Element) {
        var watchers: [UInt64: CheckedContinuation<Void, Never>] = [:]
        let waiter: Waiter? = state.withLock { state in
            guard state.terminal == nil else { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.items.append(item)
            if !state.inputWatchers.isEmpty { swap(&watchers, &state.inputWatchers) }
            return nil
        }
        for watcher in watchers.values { watcher.resume() }
        if let waiter {
            waiter.timer.cancel()
            waiter.continuation.resume(returning: item)
        }
    }

    /// Ends the stream with `error` (first call wins); a waiting reader with nothing left gets it now.
    func finish(_ error: RuntimeError) {
        let (waiter, watchers): (Waiter?, [CheckedContinuation<Void, Never>]) = state.withLock { state in
            guard state.terminal == nil else { return (nil, []) }
            state.terminal = error
            let watchers = state.readerWatchers + state.inputWatchers.values
            state.readerWatchers = []
            state.inputWatchers = [:]
            guard state.items.isEmpty, let waiter = state.waiter else { return (nil, watchers) }
            state.waiter = nil
            return (waiter, watchers)
        }
        for watcher in watchers { watcher.resume() }
        if let waiter {
            waiter.timer.cancel()
            waiter.continuation.resume(throwing: error)
        }
    }

    /// Notes that the other end sent something (any frame, a pong included).
    func heard() {
        lastHeard.store(NIODeadline.now().uptimeNanoseconds, ordering: .relaxed)
    }

    /// When the other end was last heard from (or the inbox was made).
    var lastHeardAt: NIODeadline { .uptimeNanoseconds(lastHeard.load(ordering: .relaxed)) }

    /// How long since the other end was last heard from (or since the inbox was made). The time is
    /// read after the last-heard value, and a later one stored meanwhile counts as now.
    var silence: Duration {
        let last = lastHeard.load(ordering: .relaxed)
        let now = NIODeadline.now().uptimeNanoseconds
        return .nanoseconds(Int64(clamping: now > last ? now - last : 0))
    }

    /// The terminal error, once finished.
    var terminalError: RuntimeError? { state.withLock { $0.terminal } }

    /// Items received but not yet read.
    var pendingCount: Int { state.withLock { $0.items.count } }

    /// The next item if one is already here, without waiting; `nil` otherwise.
    func nextIfReady() -> Element? { state.withLock { $0.items.popFirst() } }

    /// Returns once a reader is waiting in ``next(timeout:operation:)`` (at once if one already is),
    /// or once the inbox is finished: the explicit hand-off tests use instead of sleeping until a
    /// receive "has probably started".
    func readerIsWaiting() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now: Bool = state.withLock { state in
                if state.waiter != nil || state.terminal != nil { return true }
                state.readerWatchers.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Returns once an item is waiting to be read or the inbox is finished (at once if either is
    /// so), without reading anything; or once the calling task is cancelled.
    func awaitInput() async {
        let id: UInt64 = state.withLock { state in
            state.nextWaiterID &+= 1
            return state.nextWaiterID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now: Bool = state.withLock { state in
                    if !state.items.isEmpty || state.terminal != nil || Task.isCancelled { return true }
                    state.inputWatchers[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.inputWatchers.removeValue(forKey: id) }?.resume()
        }
    }

    /// Returns the next item, or throws the terminal error, `RuntimeError.timeout`, or
    /// `CancellationError`. Only one reader may wait at a time (else `.invalidState`).
    func next(timeout: Duration, operation: String) async throws -> Element {
        // An item already here is returned without suspending (no continuation, timer or hop
        // through the executor): the desktop's post-handshake and update messages arrive with
        // message 2 in one read.
        let (queued, id): (Element?, UInt64) = state.withLock { state in
            if let item = state.items.popFirst() { return (item, 0) }
            state.nextWaiterID &+= 1
            return (nil, state.nextWaiterID)
        }
        if let queued { return queued }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Element, any Error>) in
                var watchers: [CheckedContinuation<Void, Never>] = []
                let immediate: Result<Element, any Error>? = state.withLock { state in
                    if let item = state.items.popFirst() { return .success(item) }
                    if let terminal = state.terminal { return .failure(terminal) }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if state.waiter != nil {
                        return .failure(RuntimeError(.invalidState, "\(operation): another receive is already waiting"))
                    }
                    watchers = state.readerWatchers
                    state.readerWatchers = []
                    let due = NIODeadline.now() + TimeAmount(timeout)
                    let timer = DeadlineTimer.arm(after: timeout, on: timerLoop) { [weak self] in
                        self?.deadlineReached(id: id, due: due, error: RuntimeError.timeout(operation, after: timeout))
                    }
                    state.waiter = Waiter(id: id, continuation: continuation, timer: timer)
                    return nil
                }
                for watcher in watchers { watcher.resume() }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            self.expire(id: id, with: CancellationError())
        }
    }

    /// How late a receive's timer may fire before its wait is taken for one the process slept
    /// through (stopped, suspended, starved): it then gets ``frozenGrace`` more, once.
    static var frozenLateness: TimeAmount { .seconds(1) }
    /// The time a wait the process slept through gets after its timer: a message that came
    /// meanwhile sits in a socket (or a relay in the same process) that is read only after the
    /// timer, on waking, and would lose to a timeout this side did not cause.
    static var frozenGrace: Duration { .milliseconds(500) }

    /// The timer of waiter `id`, due at `due`: fails it, unless the timer fired so late that the
    /// process did not run, when it gets ``frozenGrace`` more.
    private func deadlineReached(id: UInt64, due: NIODeadline, error: RuntimeError) {
        guard NIODeadline.now() - due > Self.frozenLateness else {
            expire(id: id, with: error)
            return
        }
        let grace = DeadlineTimer.arm(after: Self.frozenGrace, on: timerLoop) { [weak self] in self?.expire(id: id, with: error) }
        let waiting = state.withLock { state -> Bool in
            guard var waiter = state.waiter, waiter.id == id else { return false }
            waiter.timer = grace
            state.waiter = waiter
            return true
        }
        if !waiting { grace.cancel() }
    }

    /// Fails the waiter `id` if it is still waiting.
    private func expire(id: UInt64, with error: any Error) {
        let waiter: Waiter? = state.withLock { state in
            guard let waiter = state.waiter, waiter.id == id else { return nil }
            state.waiter = nil
            return waiter
        }
        if let waiter {
            waiter.timer.cancel()
            waiter.continuation.resume(throwing: error)
        }
    }
}
