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

    /// `wanted` connections, or as many as fit under `limit` (the soft limit in force, `nil` if
    /// unknown) beside `reserved` descriptors the caller holds otherwise, at least 1: the cap of a
    /// server that must answer a connection past it (a fast 503) rather than fail to accept it.
    package static func cap(_ wanted: Int, under limit: Int?, reserved: Int = 0) -> Int {
        guard let limit else { return wanted }
        return max(1, min(wanted, connectionsFitting(limit) - reserved))
    }

    /// The descriptors a desktop keeps for itself beside its servers' connections: its own
    /// connection to the relay, the relying party's (`--rp-url`), the proximity socket, its stores.
    package static let desktopReserve = 8

    /// The cap of `desktop --web`'s (and `demo --web`'s) page server under `limit`: its default, or
    /// a quarter of what the limit holds, the rest being the embedded relay's
    /// (``embeddedRelayCap(_:under:)``).
    package static func webPageCap(_ wanted: Int, under limit: Int?) -> Int {
        guard let limit else { return wanted }
        return max(1, min(wanted, connectionsFitting(limit) / 4))
    }

    /// The `maxConnections` of a desktop's (or demo's) embedded relay under `limit`: `wanted`, or
    /// what the limit holds beside the desktop's own descriptors (``desktopReserve``) and a quarter
    /// kept for a page server (``webPageCap(_:under:)``), at least 2 (one tunnel).
    package static func embeddedRelayCap(_ wanted: Int, under limit: Int?) -> Int {
        guard let limit else { return wanted }
        let fits = connectionsFitting(limit)
        return max(2, min(wanted, fits - fits / 4 - desktopReserve))
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
