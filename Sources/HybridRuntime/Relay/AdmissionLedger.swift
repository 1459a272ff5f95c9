import HybridCore
import NIOCore
import NIOHTTP1
import Synchronization

/// The relay's admission caps against hostile clients (Docs/RELAY.md, "Limits"), on top of
/// ``RelayConfiguration/maxConnections``:
///
/// - ``RelayConfiguration/maxPendingUpgrades``: connections that have not finished their WebSocket
///   upgrade (slow-loris requests, silent or half-sent sockets). One more is answered a fixed **503**
///   at once, so they cannot take the room of upgraded tunnels.
/// - ``RelayConfiguration/maxConnectionsPerSource``: open connections from one source IP address;
///   one more is answered a fixed **429**.
/// - ``RelayConfiguration/maxWaitingTunnelsPerSource``: tunnels one source address opened
///   (`/cable/new`, `/cable/contact`) that nobody has joined yet; one more is answered **429**.
///
/// A cap of 0 is off. Connections without a peer address (in-memory test channels) are counted as
/// pending but belong to no source. One ledger per shard, confined to the shard's event loop; all
/// three counts live in one ``AdmissionCounts`` shared by every shard, so the caps hold for the
/// whole relay. An unjoined tunnel is counted from the moment its request passes the cap (a
/// reservation on the connection, released if the request is refused for another reason or the
/// connection closes first) until someone claims its joiner side or it closes.
final class AdmissionLedger {
    private let maxPendingUpgrades: Int
    private let maxConnectionsPerSource: Int
    private let maxWaitingTunnelsPerSource: Int

    /// Returns freed memory to the system when the relay falls idle (it sees every close).
    let idleTrim = IdleMemoryTrim()

    /// The relay-wide counts (every shard's ledger shares them).
    private let counts: AdmissionCounts

    init(configuration: RelayConfiguration, counts: AdmissionCounts = AdmissionCounts()) {
        self.counts = counts
        maxPendingUpgrades = configuration.maxPendingUpgrades
        maxConnectionsPerSource = configuration.maxConnectionsPerSource
        maxWaitingTunnelsPerSource = configuration.maxWaitingTunnelsPerSource
    }

    /// The source address the caps count `channel` under: its peer's IP address, if it has one.
    static func source(of channel: Channel) -> String? {
        channel.remoteAddress?.ipAddress
    }

    /// A new connection: counts it, or returns the refusal that answers it (counted nowhere).
    func admit(_ connection: RelayConnection) -> AdmissionRefusal? {
        if let refusal = counts.admit(
            source: connection.source, maxPending: maxPendingUpgrades, maxPerSource: maxConnectionsPerSource)
        {
            return refusal
        }
        connection.admission = .pending
        return nil
    }

    /// `connection` finished its upgrade: it no longer counts as pending.
    func upgraded(_ connection: RelayConnection) {
        guard connection.admission == .pending else { return }
        connection.admission = .upgraded
        counts.upgraded()
    }

    /// `connection` closed: release whatever it counted for.
    func closed(_ connection: RelayConnection) {
        let wasPending: Bool
        switch connection.admission {
        case .notCounted:
            return
        case .pending:
            wasPending = true
        case .upgraded:
            wasPending = false
        }
        connection.admission = .notCounted
        counts.closed(source: connection.source, wasPending: wasPending)
        releaseWaitingReservation(of: connection)
    }

    /// The refusal for a request that would open one more unjoined tunnel from `connection`'s source
    /// (`/cable/new`, or a `/cable/contact` that passes the method, subprotocol and origin checks),
    /// or `nil` when it may go on to the usual checks.
    func waitingTunnelRefusal(for head: HTTPRequestHead, from connection: RelayConnection, configuration: RelayConfiguration)
        -> RelayRejection?
    {
        guard maxWaitingTunnelsPerSource > 0, let source = connection.source,
            head.method == .GET, RelayRegistry.offersSubprotocol(head.headers),
            configuration.originPolicy.check(head.headers) == nil
        else { return nil }
        switch TunnelServicePath(parsing: head.uri) {
        case .new?, .contact?: break
        default: return nil
        }
        guard connection.waitingReservation == nil else { return nil }
        // Checked and counted in one step, so requests on different loops cannot both take the
        // last place.
        guard counts.reserveWaitingTunnel(source: source, max: maxWaitingTunnelsPerSource) else {
            return RelayRejection(
                status: .tooManyRequests,
                reason: "too many unjoined tunnels from this address (\(maxWaitingTunnelsPerSource)); try again later"
            )
        }
        connection.waitingReservation = source
        return nil
    }

    /// `connection` opened `tunnel` as its creator: the tunnel takes over the connection's
    /// reservation and counts as waiting until someone claims its joiner side or it closes
    /// (``RelayTunnel/leftWaiting()``; a joiner that leaves before its upgrade completes does not
    /// bring it back).
    func tunnelOpened(_ tunnel: RelayTunnel, by connection: RelayConnection) {
        guard let source = connection.waitingReservation else { return }
        connection.waitingReservation = nil
        tunnel.waitingSource = source
    }

    /// The request of `connection` did not open a tunnel (refused, or the connection closed first):
    /// its place among its source's unjoined tunnels is free again.
    func releaseWaitingReservation(of connection: RelayConnection) {
        guard let source = connection.waitingReservation else { return }
        connection.waitingReservation = nil
        counts.tunnelLeftWaiting(source: source)
    }

    static func pendingRefusal(_ cap: Int) -> AdmissionRefusal {
        AdmissionRefusal(status: 503, reason: "too many connections awaiting their upgrade (\(cap)); try again later")
    }

    static func sourceRefusal(_ cap: Int) -> AdmissionRefusal {
        AdmissionRefusal(status: 429, reason: "too many connections from this address (\(cap))")
    }
}

/// A connection refused by a pending-upgrade or per-source cap: its status (for the statistics),
/// its reason (for the log and the body) and the fixed response made of them, sent unread.
struct AdmissionRefusal: Sendable, Hashable {
    let status: Int
    let reason: String

    /// The answer: a `text/plain` HTTP/1.1 response with the reason as its body.
    var response: String {
        OverCapacityHandler.fixedResponse(HTTPResponseStatus(statusCode: status), body: reason)
    }
}

/// How a connection is counted by the ``AdmissionLedger``.
enum AdmissionState {
    /// Not counted (refused, or not admitted yet).
    case notCounted
    /// Counted as awaiting its upgrade (and under its source).
    case pending
    /// Upgraded; still counted under its source.
    case upgraded
}

/// The admission counts every shard shares: connections awaiting their upgrade and open
/// connections per source address. Any thread (a mutex; taken once per connection event, never
/// per message).
final class AdmissionCounts: Sendable {
    private struct State {
        var pending = 0
        var bySource: [String: Int] = [:]
        /// Unjoined tunnels (and reservations for them) by source address.
        var waitingBySource: [String: Int] = [:]
    }
    private let state = Mutex(State())

    init() {}

    /// Counts one more connection from `source`, or returns the refusal of the cap that refuses it.
    func admit(source: String?, maxPending: Int, maxPerSource: Int) -> AdmissionRefusal? {
        state.withLock { state in
            if maxPending > 0, state.pending >= maxPending {
                return AdmissionLedger.pendingRefusal(maxPending)
            }
            if let source, maxPerSource > 0, state.bySource[source, default: 0] >= maxPerSource {
                return AdmissionLedger.sourceRefusal(maxPerSource)
            }
            state.pending += 1
            if let source { state.bySource[source, default: 0] += 1 }
            return nil
        }
    }

    /// An admitted connection finished its upgrade.
    func upgraded() {
        state.withLock { $0.pending -= 1 }
    }

    /// An admitted connection closed (`wasPending`: before its upgrade).
    func closed(source: String?, wasPending: Bool) {
        state.withLock { state in
            if wasPending { state.pending -= 1 }
            guard let source else { return }
            if let count = state.bySource[source], count > 1 {
                state.bySource[source] = count - 1
            } else {
                state.bySource[source] = nil
            }
        }
    }

    /// Counts one more unjoined tunnel from `source` unless it already has `max`; `false`: refused.
    func reserveWaitingTunnel(source: String, max: Int) -> Bool {
        state.withLock { state in
            guard state.waitingBySource[source, default: 0] < max else { return false }
            state.waitingBySource[source, default: 0] += 1
            return true
        }
    }

    /// One of `source`'s unjoined tunnels was joined or closed, or its reservation released.
    func tunnelLeftWaiting(source: String) {
        state.withLock { state in
            if let count = state.waitingBySource[source], count > 1 {
                state.waitingBySource[source] = count - 1
            } else {
                state.waitingBySource[source] = nil
            }
        }
    }

    /// Unjoined tunnels (and reservations) counted for `source`.
    func waitingTunnels(source: String) -> Int {
        state.withLock { $0.waitingBySource[source, default: 0] }
    }
}
