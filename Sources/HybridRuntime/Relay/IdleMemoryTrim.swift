import HybridFiles
import NIOCore
import NIOEmbedded
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Gives the memory a burst of connections used back to the system once the relay is idle.
///
/// glibc's allocator keeps the heap pages that freed connections leave behind, so without this a
/// relay's RSS stays at its peak after an attack (the hostile soak measured 31 MiB before, 92 MiB
/// during and still 92 MiB after, the same after three soaks in a row: kept, not leaked).
/// `malloc_trim(0)` returns the free pages of every arena. It runs on the relay's event loop one
/// second after the last connection closed, and only if none is open by then; and, since a relay
/// that always has a connection open (a listening linked phone, steady traffic) is never idle, also
/// one second after a burst ended: when the open connections fell to a quarter of their peak since
/// the last trim, a peak of at least `burst`. Such a trim runs at most once per `spacing` in the
/// whole process (the shards' trimmers share a ``TrimClock``: `malloc_trim` walks every arena, and
/// a live relay should pay that once); one that comes too soon is put off until the spacing has
/// passed, not dropped. Confined to the loop.
final class IdleMemoryTrim {
    private var idleScheduled = false
    private var burstScheduled = false
    private let delay: TimeAmount
    private let burst: Int
    private let spacing: TimeAmount
    private let clock: TrimClock
    private let trim: () -> Void
    /// The most connections open since the last trim, as seen by the closes.
    private var peak = 0

    /// `trim` (glibc's `malloc_trim(0)` by default) runs `delay` after the last connection closed,
    /// or after a burst of at least `burst` connections fell to a quarter (then at most once per
    /// `spacing` of `clock`, which every trimmer of the process shares by default).
    init(
        delay: TimeAmount = .seconds(1), burst: Int = 256, spacing: TimeAmount = .seconds(10), clock: TrimClock = .shared,
        trim: @escaping () -> Void = { _ = IdleMemoryTrim.mallocTrim?(0) }
    ) {
        self.delay = delay
        self.burst = burst
        self.spacing = spacing
        self.clock = clock
        self.trim = trim
    }

    /// Call after a connection closed; `openConnections` reads the relay's count at the time.
    func connectionClosed(on loop: EventLoop, openConnections: @escaping () -> Int) {
        // An embedded loop (the relay-request fuzz target runs every timer after each input) holds
        // no socket memory worth a trim per input.
        guard !(loop is EmbeddedEventLoop) else { return }
        let open = openConnections()
        peak = max(peak, open + 1)
        if open == 0, !idleScheduled {
            idleScheduled = true
            loop.assumeIsolated().scheduleTask(in: delay) { [self] in
                self.idleScheduled = false
                guard openConnections() == 0 else { return }
                self.clock.record(now: NIODeadline.now())
                self.trim()
                self.peak = 0
            }
        } else if open > 0, !burstScheduled, burstEnded(open: open) {
            burstScheduled = true
            // It waits out the spacing since the last trim, however long that is.
            let wait = max(delay, clock.remaining(spacing, now: NIODeadline.now()))
            loop.assumeIsolated().scheduleTask(in: wait) { [self] in
                self.burstScheduled = false
                let open = openConnections()
                // Idle by now (the idle trim covers it), or no longer a burst's end.
                guard open > 0, self.burstEnded(open: open) else { return }
                // Another shard may have trimmed meanwhile: that trim covered this burst too.
                if self.clock.claim(self.spacing, now: NIODeadline.now()) { self.trim() }
                self.peak = open
            }
        }
    }

    /// The open connections fell to a quarter of a peak large enough to be worth a trim.
    private func burstEnded(open: Int) -> Bool { peak >= burst && open <= peak / 4 }

    /// glibc's `malloc_trim` (declared in `<malloc.h>`, which the Glibc module does not import),
    /// looked up once; `nil` where the C library has none.
    static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
        #if canImport(Glibc)
        return CLibrary.function("malloc_trim", as: (@convention(c) (Int) -> Int32).self)
        #else
        return nil
        #endif
    }()
}

/// When the process last trimmed (any shard), so that trims on a live relay keep their spacing.
final class TrimClock: Sendable {
    /// The clock every relay trimmer of the process shares.
    static let shared = TrimClock()
    /// `NIODeadline.uptimeNanoseconds` of the last trim, or -1.
    private let last = Atomic<Int64>(-1)

    /// A clock on which no trim has run yet.
    init() {}

    /// How long until `spacing` has passed since the last trim (zero when it has, or none ran).
    func remaining(_ spacing: TimeAmount, now: NIODeadline) -> TimeAmount {
        let previous = last.load(ordering: .relaxed)
        guard previous >= 0 else { return .zero }
        let elapsed = Int64(now.uptimeNanoseconds) - previous
        return .nanoseconds(max(0, spacing.nanoseconds - elapsed))
    }

    /// Takes the right to trim now if `spacing` has passed since the last trim; `false` if not.
    func claim(_ spacing: TimeAmount, now: NIODeadline) -> Bool {
        let stamp = Int64(now.uptimeNanoseconds)
        var previous = last.load(ordering: .relaxed)
        while previous < 0 || stamp - previous >= spacing.nanoseconds {
            let (exchanged, current) = last.compareExchange(expected: previous, desired: stamp, ordering: .relaxed)
            if exchanged { return true }
            previous = current
        }
        return false
    }

    /// An idle trim ran now.
    func record(now: NIODeadline) {
        last.store(Int64(now.uptimeNanoseconds), ordering: .relaxed)
    }
}
