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
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)  // RLIM_INFINITY (all ones) clamps to Int.max
    }

    /// How many connections fit under `limit` descriptors for a relay on `eventLoops` loops: the
    /// standard streams, the listener and each loop's own descriptors (epoll, wake-up, timer) are
    /// kept free, with room for files the relay opens (recordings) and a margin.
    package static func connectionsFitting(_ limit: Int, eventLoops: Int) -> Int {
        max(1, limit - 32 - 4 * eventLoops)
    }

    #if canImport(Glibc)
    private static let resource = Int32(RLIMIT_NOFILE.rawValue)
    #else
    private static let resource = RLIMIT_NOFILE
    #endif
}
