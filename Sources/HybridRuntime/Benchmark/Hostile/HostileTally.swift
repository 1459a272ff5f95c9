import Synchronization

/// Counters of a hostile soak, shared by every attacker task: outcomes by attack, extra counters
/// (pings sent, fragments sent, …), how long dropped connections lived, and the number of attacker
/// connections open now (and the peak).
final class HostileTally: Sendable {
    /// One attack's figures.
    struct Attack: Sendable {
        var outcomes: [String: Int] = [:]
        var counters: [String: Int] = [:]
        /// Seconds from connect to the relay's drop, for "dropped" outcomes (first 50,000 kept).
        var dropSeconds: [Double] = []
    }

    private struct State {
        var attacks: [HostileAttack: Attack] = [:]
        var open = 0
        var peakOpen = 0
        var opened = 0
    }

    private let state = Mutex(State())

    /// Records one connection's outcome.
    func record(_ attack: HostileAttack, _ outcome: String, dropAfter: Duration? = nil) {
        state.withLock { state in
            state.attacks[attack, default: Attack()].outcomes[outcome, default: 0] += 1
            if let dropAfter, state.attacks[attack]!.dropSeconds.count < 50_000 {
                state.attacks[attack]!.dropSeconds.append(dropAfter.benchmarkSeconds)
            }
        }
    }

    /// Adds `amount` to a named counter of `attack`.
    func count(_ attack: HostileAttack, _ name: String, _ amount: Int) {
        state.withLock { $0.attacks[attack, default: Attack()].counters[name, default: 0] += amount }
    }

    /// An attacker connection was established.
    func opened() {
        state.withLock { state in
            state.open += 1
            state.opened += 1
            state.peakOpen = max(state.peakOpen, state.open)
        }
    }

    /// An attacker connection was closed.
    func closed() {
        state.withLock { $0.open -= 1 }
    }

    /// Attacker connections open now.
    var openNow: Int { state.withLock { $0.open } }

    /// A snapshot: per-attack figures, connections opened in all, and the peak open at once.
    var snapshot: (attacks: [HostileAttack: Attack], opened: Int, peakOpen: Int) {
        state.withLock { ($0.attacks, $0.opened, $0.peakOpen) }
    }
}
