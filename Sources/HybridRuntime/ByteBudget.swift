import Synchronization

/// Bytes held at once against a bound, by any thread: the request bodies `rp` holds across its
/// connections (each held whole until answered: without a bound 1,000 connections each sending
/// just under 1 MiB took the process from 35 MB to 1.24 GB; a reservation past ``limit`` is
/// answered 503), and the messages `relay --record` holds until their tunnels close
/// (``TunnelRecorder``). A holder reserves bytes as they come and gives them back when done.
package final class ByteBudget: Sendable {
    /// The most bytes reserved at once.
    package let limit: Int
    private let used = Atomic<Int>(0)

    /// A budget of `limit` bytes.
    package init(limit: Int) {
        self.limit = limit
    }

    /// Reserves `bytes` if they fit within ``limit`` with those already reserved; `false` (and
    /// nothing reserved) if not.
    package func reserve(_ bytes: Int) -> Bool {
        var current = used.load(ordering: .relaxed)
        while current + bytes <= limit {
            let (exchanged, now) = used.compareExchange(expected: current, desired: current + bytes, ordering: .relaxed)
            if exchanged { return true }
            current = now
        }
        return false
    }

    /// Gives back `bytes` reserved before.
    package func release(_ bytes: Int) {
        guard bytes > 0 else { return }
        used.subtract(bytes, ordering: .relaxed)
    }

    /// The bytes reserved now.
    package var reserved: Int { used.load(ordering: .relaxed) }
}
