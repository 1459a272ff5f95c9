import NIOCore

/// A token bucket: `burst` tokens at once, then `perSecond` more a second, never more than `burst`
/// held. The relay's pong budget, its info-log limit and the loopback servers' refusal lines all
/// meter with it. A value: the owner confines it (an event loop) or locks it.
package struct TokenBucket: Sendable {
    /// Tokens available at once.
    package let burst: Double
    /// Tokens added a second.
    package let perSecond: Double
    private var tokens: Double
    private var last: NIODeadline?

    /// A full bucket.
    package init(burst: Double, perSecond: Double) {
        self.burst = burst
        self.perSecond = perSecond
        self.tokens = burst
    }

    /// Adds what the time since the last call earned; whether a token is there now (none taken).
    package mutating func hasToken(now: NIODeadline = .now()) -> Bool {
        if let last {
            let elapsed = Double((now - last).nanoseconds) / 1e9
            tokens = min(burst, tokens + max(0, elapsed) * perSecond)
        }
        last = now
        return tokens >= 1
    }

    /// Takes a token if one is there (after ``hasToken(now:)``'s refill); `false` when none is.
    package mutating func take(now: NIODeadline = .now()) -> Bool {
        guard hasToken(now: now) else { return false }
        tokens -= 1
        return true
    }
}
