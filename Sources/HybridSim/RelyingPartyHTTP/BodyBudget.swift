import Synchronization

/// The request-body bytes a ``RelyingPartyHTTPServer`` holds at once, across all its connections:
/// each body is held whole until it is answered, so without a bound 1,000 connections each sending
/// just under 1 MiB (and then nothing, until the request deadline) took the process from 35 MB to
/// 1.24 GB. A connection reserves its body's bytes as they are announced (`Content-Length`) or
/// arrive (chunked), and gives them back once answered; a reservation past ``limit`` is refused, and
/// the server answers 503.
final class BodyBudget: Sendable {
    /// The most bytes reserved at once.
    let limit: Int
    private let used = Atomic<Int>(0)

    /// A budget of `limit` bytes.
    init(limit: Int) {
        self.limit = limit
    }

    /// Reserves `bytes` if they fit within ``limit`` with those already reserved; `false` (and
    /// nothing reserved) if not.
    func reserve(_ bytes: Int) -> Bool {
        var current = used.load(ordering: .relaxed)
        while current + bytes <= limit {
            let (exchanged, now) = used.compareExchange(expected: current, desired: current + bytes, ordering: .relaxed)
            if exchanged { return true }
            current = now
        }
        return false
    }

    /// Gives back `bytes` reserved before.
    func release(_ bytes: Int) {
        guard bytes > 0 else { return }
        used.subtract(bytes, ordering: .relaxed)
    }

    /// The bytes reserved now.
    var reserved: Int { used.load(ordering: .relaxed) }
}
