@testable import HybridRuntime
import NIOCore
import Testing

/// The one token bucket behind the pong budget, the relay's log limit and the refusal lines.
@Suite("Token bucket")
struct TokenBucketTests {
    @Test("a burst at once, then perSecond a second, never more than the burst; hasToken takes none; time going back earns none")
    func metering() {
        var bucket = TokenBucket(burst: 3, perSecond: 2)
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        #expect((0..<4).map { _ in bucket.take(now: start) } == [true, true, true, false])
        let partial = bucket.hasToken(now: start + .milliseconds(400))  // 0.8 of a token
        let whole = bucket.hasToken(now: start + .milliseconds(500))  // 1 token
        let still = bucket.hasToken(now: start + .milliseconds(500))  // hasToken took none
        let taken = bucket.take(now: start + .milliseconds(500))
        let backwards = bucket.take(now: start)  // earlier than the last call: nothing earned
        #expect([partial, whole, still, taken, backwards] == [false, true, true, true, false])
        // A long pause refills to the burst, not beyond.
        let later = start + .seconds(60)
        #expect((0..<4).map { _ in bucket.take(now: later) } == [true, true, true, false])
    }
}
