import NIOCore

/// A one-shot deadline: a timer on an event loop when there is one (cheap to arm and to cancel),
/// otherwise a sleeping task. Used for a waiting receive (``MessageInbox``) and for the phone's
/// responder (`AuthenticatorDriver`).
enum DeadlineTimer: Sendable {
    case loop(Scheduled<Void>)
    case task(Task<Void, Never>)

    /// Calls `fire` after `delay` unless cancelled first: on `loop` if given, else from a task.
    static func arm(after delay: Duration, on loop: EventLoop?, _ fire: @escaping @Sendable () -> Void) -> DeadlineTimer {
        if let loop {
            return .loop(loop.scheduleTask(in: TimeAmount(delay), fire))
        }
        return .task(
            Task {
                try? await Task.sleep(for: delay)
                guard !Task.isCancelled else { return }
                fire()
            })
    }

    /// Stops the deadline; `fire` is not called afterwards (unless it already ran).
    func cancel() {
        switch self {
        case .loop(let scheduled): scheduled.cancel()
        case .task(let task): task.cancel()
        }
    }
}
