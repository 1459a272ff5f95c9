import Logging
import NIOCore

/// A token bucket over the relay's info-level logs (tunnel opened, attached, closed, refused
/// requests). A burst of ``burst`` lines passes, then ``perSecond`` lines a second; lines over the
/// budget go to debug level instead, and the next line that passes says how many were demoted.
/// Confined to the relay's event loop.
package final class RelayLogLimiter {
    /// Lines that pass at once.
    package static let burst = 50.0
    /// Lines per second after the burst.
    package static let perSecond = 20.0

    private var bucket = TokenBucket(burst: RelayLogLimiter.burst, perSecond: RelayLogLimiter.perSecond)
    private var demoted = 0

    /// A full budget.
    package init() {}

    /// Counts a line over the budget without building it, when it would be demoted to a debug line
    /// that `level` hides; `false` when the line must be logged (through ``info(_:_:)``).
    package func skipsDemoted(at level: Logger.Level) -> Bool {
        guard level > .debug, !bucket.hasToken() else { return false }
        demoted += 1
        return true
    }

    /// Logs `message` at info level if the budget allows, otherwise at debug level.
    package func info(_ logger: Logger, _ message: @autoclosure () -> String) {
        if bucket.take() {
            if demoted > 0 {
                logger.info("\(message()) (\(demoted) earlier info line(s) of this event loop went to debug level: info log rate limit)")
                demoted = 0
            } else {
                logger.info("\(message())")
            }
        } else {
            demoted += 1
            logger.debug("\(message())")
        }
    }
}
