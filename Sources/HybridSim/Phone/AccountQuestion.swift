import HybridCore
import Synchronization

/// One question to the phone's user (which account?), bounded in time: the answer, the time
/// running out, or the question withdrawn because the asking task was cancelled (the transaction
/// ended). A chooser that ignores cancellation cannot hold the phone: its late answer is dropped.
enum AccountQuestion {
    enum Outcome: Sendable {
        /// The chooser's answer (`nil`: the user chose none).
        case answered(Passkey?)
        case timedOut
        case withdrawn
    }

    static func ask(
        _ chooser: @escaping AccountChooser, rpId: String, accounts: [Passkey], within limit: Duration
    ) async -> Outcome {
        let race = Race()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                race.start(
                    continuation,
                    tasks: [
                        Task { race.finish(.answered(await chooser(rpId, accounts))) },
                        Task {
                            try? await Task.sleep(for: limit)
                            race.finish(.timedOut)
                        },
                    ])
            }
        } onCancel: {
            race.finish(.withdrawn)
        }
    }

    /// Resumes the asker once, with the first outcome, and cancels the rest.
    private final class Race: Sendable {
        private struct State {
            var continuation: CheckedContinuation<Outcome, Never>?
            var outcome: Outcome?
            var tasks: [Task<Void, Never>] = []
        }
        private let state = Mutex(State())

        func start(_ continuation: CheckedContinuation<Outcome, Never>, tasks: [Task<Void, Never>]) {
            let early = state.withLock { state -> Outcome? in
                state.tasks = tasks
                guard let outcome = state.outcome else {
                    state.continuation = continuation
                    return nil
                }
                return outcome
            }
            if let early {
                tasks.forEach { $0.cancel() }
                continuation.resume(returning: early)
            }
        }

        func finish(_ outcome: Outcome) {
            let (continuation, tasks) = state.withLock { state -> (CheckedContinuation<Outcome, Never>?, [Task<Void, Never>]) in
                guard state.outcome == nil else { return (nil, []) }
                state.outcome = outcome
                return (state.continuation.take(), state.tasks)
            }
            continuation?.resume(returning: outcome)
            tasks.forEach { $0.cancel() }
        }
    }
}
