import NIOCore
import Synchronization

/// The time source of a tunnel's lifetime and idle timer (``RelayTunnel``).
///
/// `.system` (the default, and the only one the relay uses outside tests) reads `NIODeadline.now()`
/// and schedules on the tunnel's event loop, exactly as if no clock were injected. `.manual` lets a
/// test move time forward by hand (``ManualRelayClock/advance(by:)``), so the timers can be tested
/// with no sleep and no reading of the wall clock. An enum rather than a protocol existential, so
/// the per-message read of the time (`lastActivity`) stays one predictable branch.
package enum RelayClock: Sendable {
    /// `NIODeadline.now()` and the event loop's own timers.
    case system
    /// A clock that only moves when the test advances it.
    case manual(ManualRelayClock)

    /// The current time.
    @inline(__always)
    func now() -> NIODeadline {
        switch self {
        case .system: return .now()
        case .manual(let clock): return clock.now
        }
    }

    /// Runs `task` on `eventLoop` once `delay` has passed on this clock. Call on `eventLoop`.
    func scheduleTask(
        in delay: TimeAmount,
        on eventLoop: EventLoop,
        _ task: @escaping () -> Void
    ) -> RelayTimer {
        switch self {
        case .system:
            return .system(eventLoop.assumeIsolated().scheduleTask(in: delay, task))
        case .manual(let clock):
            return .manual(clock, clock.schedule(in: delay, on: eventLoop, task))
        }
    }
}

/// A timer scheduled with a ``RelayClock``.
enum RelayTimer {
    case system(Scheduled<Void>)
    case manual(ManualRelayClock, UInt64)

    /// Stops the timer if it has not fired yet.
    func cancel() {
        switch self {
        case .system(let scheduled): scheduled.cancel()
        case .manual(let clock, let id): clock.cancel(id)
        }
    }
}

/// A clock for tests: its time starts at an arbitrary instant and moves only by
/// ``advance(by:)``, which runs every timer that falls due, in deadline order, each on its own event
/// loop, and returns once they have all run.
package final class ManualRelayClock: Sendable {
    private struct Pending {
        let id: UInt64
        let deadline: NIODeadline
        let eventLoop: EventLoop
        let task: NIOLoopBound<() -> Void>
    }

    private struct State {
        var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var nextID: UInt64 = 0
        var pending: [Pending] = []
    }

    private let state = Mutex(State())

    package init() {}

    /// The clock's current time.
    package var now: NIODeadline { state.withLock { $0.now } }

    /// How many timers are scheduled and not yet run or cancelled.
    package var pendingTimers: Int { state.withLock { $0.pending.count } }

    fileprivate func schedule(in delay: TimeAmount, on eventLoop: EventLoop, _ task: @escaping () -> Void) -> UInt64 {
        let bound = NIOLoopBound(task, eventLoop: eventLoop)
        return state.withLock { state in
            state.nextID += 1
            state.pending.append(
                Pending(id: state.nextID, deadline: state.now + delay, eventLoop: eventLoop, task: bound)
            )
            return state.nextID
        }
    }

    fileprivate func cancel(_ id: UInt64) {
        state.withLock { $0.pending.removeAll { $0.id == id } }
    }

    /// Moves the time forward by `amount`, running every timer due by then (including ones those
    /// timers schedule) at its own deadline, in deadline order, and waiting for each to finish on
    /// its event loop. Do not call from an event loop.
    package func advance(by amount: Duration) async throws {
        let target = state.withLock { $0.now } + TimeAmount(amount)
        while true {
            let due: Pending? = state.withLock { state in
                // Earliest deadline first; equal deadlines in the order they were scheduled.
                guard
                    let index = state.pending.indices.min(by: {
                        (state.pending[$0].deadline, state.pending[$0].id)
                            < (state.pending[$1].deadline, state.pending[$1].id)
                    }),
                    state.pending[index].deadline <= target
                else { return nil }
                let task = state.pending.remove(at: index)
                state.now = max(state.now, task.deadline)
                return task
            }
            guard let due else { break }
            try await due.eventLoop.submit { due.task.value() }.get()
        }
        state.withLock { $0.now = target }
    }
}
