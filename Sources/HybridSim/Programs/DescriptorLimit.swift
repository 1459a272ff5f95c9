import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's open-file limit (`ulimit -n`), which bounds how many connections a relay can hold.
package enum DescriptorLimit {
    /// Raises the soft limit to the hard one, as a server that holds many connections should (a
    /// shell's soft limit is often 1024 while the hard one allows far more; a process started
    /// later inherits the raised limit). Returns the soft limit now in force, `nil` if unknown.
    @discardableResult
    package static func raiseToHard() -> Int? {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return nil }
        var ceiling = limit.rlim_max
        #if canImport(Darwin)
        // macOS refuses a soft limit above OPEN_MAX, and its hard limit is often unlimited.
        ceiling = min(ceiling, rlim_t(OPEN_MAX))
        #endif
        if limit.rlim_cur < ceiling {
            var raised = limit
            raised.rlim_cur = ceiling
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)  // RLIM_INFINITY (all ones) clamps to Int.max
    }

    /// How many connections fit under `limit` descriptors for a process whose event loops number
    /// `eventLoops`: the standard streams, the listener and each loop's own descriptors (epoll,
    /// wake-up, timer) are kept free, with room for files the relay opens (recordings) and a margin.
    package static func connectionsFitting(_ limit: Int, eventLoops: Int = processEventLoops) -> Int {
        max(1, limit - 32 - 4 * eventLoops)
    }

    /// The event loops a `hybrid-sim` process runs: SwiftNIO's singleton group, one per core, whatever
    /// `--event-loops` uses of them.
    package static var processEventLoops: Int { NIOSingletons.groupLoopCountSuggestion }

    #if canImport(Glibc)
    private static let resource = Int32(RLIMIT_NOFILE.rawValue)
    #else
    private static let resource = RLIMIT_NOFILE
    #endif
}
