#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HybridFiles

/// The process's address-space limit (`ulimit -v`, `RLIMIT_AS`), which counts memory reserved as
/// well as memory used.
///
/// glibc's allocator reserves 64 MiB of address space for each thread arena it makes (up to eight
/// per core), so a `hybrid-sim` process with its event loops, Dispatch's and Swift concurrency's
/// threads reserves far more than it uses: `demo` peaked at about 1 GB of address space while using
/// tens of MB. Under a limit that reservation fails first (a `Cannot allocate memory` when the demo
/// starts its phone, or a trap in the runtime). A process under a finite limit therefore uses one
/// arena (``fitAllocator()``): `demo` then peaks at about 230 MB; with no limit nothing changes.
package enum AddressSpaceLimit {
    /// The limit below which `hybrid-sim` does not start (``HybridSimCommand``): under it the
    /// runtime's and SwiftNIO's threads and buffers cannot all be had, and a command fails at an
    /// arbitrary point (seen: a trap in the runtime at 150 MB, a refused thread or spawn).
    package static let startFloor = 256 << 20

    /// The soft limit in bytes, `nil` when there is none (or it cannot be read).
    package static var current: Int? {
        var limit = rlimit()
        // RLIM_INFINITY is all ones.
        guard getrlimit(resource, &limit) == 0, limit.rlim_cur != rlim_t.max else { return nil }
        return Int(clamping: limit.rlim_cur)
    }

    /// Under a finite limit, tells glibc's allocator to keep to one arena (`M_ARENA_MAX` 1, what
    /// `MALLOC_ARENA_MAX=1` does unless that variable says otherwise), so that threads do not
    /// reserve 64 MiB each. Call before threads allocate. Returns whether it did; no-op elsewhere.
    @discardableResult
    package static func fitAllocator() -> Bool {
        guard current != nil, getenv("MALLOC_ARENA_MAX") == nil else { return false }
        #if canImport(Glibc)
        guard let setOption = mallopt else { return false }
        return setOption(arenaMaxOption, 1) == 1
        #else
        return false
        #endif
    }

    /// The error line for a limit below ``startFloor``, in KiB as `ulimit -v` counts.
    package static func belowFloorLine(_ limit: Int) -> String {
        "error: the address-space limit (ulimit -v) is \(limit >> 10) KiB; hybrid-sim needs at least "
            + "\(startFloor >> 10) KiB to start: raise the limit (ulimit -v \(startFloor >> 10), or unlimited)\n"
    }

    #if canImport(Glibc)
    /// glibc's `M_ARENA_MAX` (malloc.h).
    private static let arenaMaxOption: Int32 = -8

    /// glibc's `mallopt`, looked up so that another C library (musl) links too.
    private static let mallopt = CLibrary.function("mallopt", as: (@convention(c) (Int32, Int32) -> Int32).self)

    private static let resource = Int32(RLIMIT_AS.rawValue)
    #else
    private static let resource = RLIMIT_AS
    #endif
}
