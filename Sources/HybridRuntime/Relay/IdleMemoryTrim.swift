import NIOCore
import NIOEmbedded

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
/// the last trim, a peak of at least `burst`, at most once per `spacing`. Confined to the loop.
final class IdleMemoryTrim {
    private var scheduled = false
    private let delay: TimeAmount
    private let burst: Int
    private let spacing: TimeAmount
    private let trim: () -> Void
    /// The most connections open since the last trim, as seen by the closes.
    private var peak = 0
    private var lastTrim: NIODeadline?

    /// `trim` (glibc's `malloc_trim(0)` by default) runs `delay` after the last connection closed,
    /// or after a burst of at least `burst` connections fell to a quarter (then at most once per `spacing`).
    init(
        delay: TimeAmount = .seconds(1), burst: Int = 256, spacing: TimeAmount = .seconds(10),
        trim: @escaping () -> Void = { _ = IdleMemoryTrim.mallocTrim?(0) }
    ) {
        self.delay = delay
        self.burst = burst
        self.spacing = spacing
        self.trim = trim
    }

    /// Call after a connection closed; `openConnections` reads the relay's count at the time.
    func connectionClosed(on loop: EventLoop, openConnections: @escaping () -> Int) {
        // An embedded loop (the relay-request fuzz target runs every timer after each input) holds
        // no socket memory worth a trim per input.
        guard !(loop is EmbeddedEventLoop) else { return }
        let open = openConnections()
        peak = max(peak, open + 1)
        guard !scheduled, due(open: open, now: loop.now) else { return }
        scheduled = true
        loop.assumeIsolated().scheduleTask(in: delay) { [self] in
            self.scheduled = false
            let now = loop.now
            let open = openConnections()
            guard self.due(open: open, now: now) else { return }
            self.trim()
            self.lastTrim = now
            self.peak = open
        }
    }

    /// Idle, or a burst has ended and the last trim is `spacing` old.
    private func due(open: Int, now: NIODeadline) -> Bool {
        if open == 0 { return true }
        guard peak >= burst, open <= peak / 4 else { return false }
        return lastTrim.map { now - $0 >= spacing } ?? true
    }

    /// glibc's `malloc_trim` (declared in `<malloc.h>`, which the Glibc module does not import),
    /// looked up once; `nil` where the C library has none.
    static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
        #if canImport(Glibc)
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
        #else
        return nil
        #endif
    }()
}
