import HybridCore
import Synchronization

/// One question to the phone's user (which account?): the answer, or the question withdrawn
/// because the asking task was cancelled (the transaction ended, or the driver's deadline for the
/// user passed). A chooser that ignores cancellation cannot hold the phone: its late answer is
/// dropped.
enum AccountQuestion {
    enum Outcome: Sendable {
        /// The chooser's answer (`nil`: the user chose none).
        case answered(Passkey?)
        case withdrawn
    }

    static func ask(_ chooser: @escaping AccountChooser, rpId: String, accounts: [Passkey]) async -> Outcome {
        let race = Race()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                race.start(continuation, task: Task { race.finish(.answered(await chooser(rpId, accounts))) })
            }
        } onCancel: {
            race.finish(.withdrawn)
        }
    }

    /// Resumes the asker once, with the first outcome, and cancels the chooser's task.
    private final class Race: Sendable {
        private struct State {
            var continuation: CheckedContinuation<Outcome, Never>?
            var outcome: Outcome?
            var task: Task<Void, Never>?
        }
        private let state = Mutex(State())

        func start(_ continuation: CheckedContinuation<Outcome, Never>, task: Task<Void, Never>) {
            let early = state.withLock { state -> Outcome? in
                state.task = task
                guard let outcome = state.outcome else {
                    state.continuation = continuation
                    return nil
                }
                return outcome
            }
            if let early {
                task.cancel()
                continuation.resume(returning: early)
            }
        }

        func finish(_ outcome: Outcome) {
            let (continuation, task) = state.withLock { state -> (CheckedContinuation<Outcome, Never>?, Task<Void, Never>?) in
                guard state.outcome == nil else { return (nil, nil) }
                state.outcome = outcome
                return (state.continuation.take(), state.task)
            }
            continuation?.resume(returning: outcome)
            task?.cancel()
        }
    }
}
