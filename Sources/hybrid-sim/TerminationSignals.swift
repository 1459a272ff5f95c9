import HybridSim
import Synchronization

/// Turns SIGINT, SIGTERM, SIGHUP and SIGQUIT (``SignalRouter``) into an awaitable event instead of
/// killing the process.
final class TerminationSignals {
    private let state = SignalState()

    init() {
        SignalRouter.install()
        let state = self.state
        SignalRouter.route { number in state.fire(number) }
    }

    /// Waits for the first signal and returns its number.
    func wait() async -> Int32 {
        await withCheckedContinuation { state.register($0) }
    }

    /// What a signal after the first does (by default nothing: the first one's shutdown goes on).
    func onRepeat(_ handler: @escaping @Sendable (Int32) -> Void) {
        state.repeated(handler)
    }
}

/// The first signal received, the task waiting for it, and what a later one does.
final class SignalState: Sendable {
    private struct State {
        var received: Int32?
        var waiter: CheckedContinuation<Int32, Never>?
        var onRepeat: (@Sendable (Int32) -> Void)?
    }

    private let state = Mutex(State())

    func fire(_ number: Int32) {
        let (waiter, again): (CheckedContinuation<Int32, Never>?, (@Sendable (Int32) -> Void)?) = state.withLock { state in
            guard state.received == nil else { return (nil, state.onRepeat) }
            state.received = number
            defer { state.waiter = nil }
            return (state.waiter, nil)
        }
        waiter?.resume(returning: number)
        again?(number)
    }

    func repeated(_ handler: @escaping @Sendable (Int32) -> Void) {
        state.withLock { $0.onRepeat = handler }
    }

    func register(_ continuation: CheckedContinuation<Int32, Never>) {
        let received: Int32? = state.withLock { state in
            if let received = state.received { return received }
            state.waiter = continuation
            return nil
        }
        if let received { continuation.resume(returning: received) }
    }
}
