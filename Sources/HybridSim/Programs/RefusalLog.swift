import Foundation
import HybridRuntime
import NIOCore
import Synchronization

/// The lines a loopback server (`rp`, `desktop --web`) writes about requests it refused (and a
/// listening phone about the pushes it ignored), within a budget: any page open in the user's browser can send refused requests in a loop, and a line for
/// each would bury the program's own output (and, written on an event loop, stall it behind a
/// stderr nobody reads). A burst of ``burst`` lines passes, then ``perSecond`` a second; the ones
/// over the budget are counted, and the next line that passes says how many were not shown. Each
/// line is cut to ``lineLimit`` characters.
package final class RefusalLog: Sendable {
    /// Lines that pass at once.
    package static let burst = 20.0
    /// Lines a second after the burst.
    package static let perSecond = 2.0
    /// The longest line written (a refused request's target or header can be long).
    package static let lineLimit = 300

    private struct State {
        var bucket = TokenBucket(burst: RefusalLog.burst, perSecond: RefusalLog.perSecond)
        var dropped = 0
    }

    private let state = Mutex(State())
    private let write: @Sendable (String) -> Void
    private let noun: String

    /// Writes each line that passes with `write`; `noun` names what the lines are about in the
    /// count of those not shown ("refused request(s)", "ignored push(es)").
    package init(noun: String = "refused request(s)", _ write: @escaping @Sendable (String) -> Void) {
        self.noun = noun
        self.write = write
    }

    /// Writes `line` (cut to ``lineLimit``) if the budget allows; otherwise counts it. `now` is
    /// the clock's reading (tests pass their own, so a slow run cannot refill the budget).
    package func note(_ line: String, now: NIODeadline = .now()) {
        let dropped: Int? = state.withLock { state in
            guard state.bucket.take(now: now) else {
                state.dropped += 1
                return nil
            }
            defer { state.dropped = 0 }
            return state.dropped
        }
        guard let dropped else { return }
        let cut = line.count > Self.lineLimit ? String(line.prefix(Self.lineLimit)) + "…" : line
        write(dropped > 0 ? "\(cut) (and \(dropped) more \(noun) not shown: at most \(Int(Self.perSecond)) lines a second)" : cut)
    }

    /// Writes the count of the lines not shown since the last one written, if any (a program ending,
    /// whose last lines were over the budget, says how many there were).
    package func flush() {
        let dropped = state.withLock { state in
            defer { state.dropped = 0 }
            return state.dropped
        }
        guard dropped > 0 else { return }
        write("\(dropped) more \(noun) not shown (at most \(Int(Self.perSecond)) lines a second)")
    }
}
