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
/// pending but belong to no source. One ledger per shard, confined to the shard's event loop; the
/// pending-upgrade and per-source connection counts live in one ``AdmissionCounts`` shared by every
/// shard, so those caps hold for the whole relay. Unjoined tunnels are counted per shard (a
/// tunnel's state belongs to its shard's loop), so with N shards one source may hold up to N times
/// ``RelayConfiguration/maxWaitingTunnelsPerSource`` unjoined tunnels (Docs/RELAY.md).
final class AdmissionLedger {
    private let maxPendingUpgrades: Int
    private let maxConnectionsPerSource: Int
    private let maxWaitingTunnelsPerSource: Int

    /// Returns freed memory to the system when the relay falls idle (it sees every close).
    let idleTrim = IdleMemoryTrim()

    /// The relay-wide counts (every shard's ledger shares them).
    private let counts: AdmissionCounts
    /// Tunnels opened by each source that were not joined when last looked at, by their creator's connection.
    private var waitingBySource: [String: [ObjectIdentifier: RelayTunnel]] = [:]

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

    /// A new connection: counts it, or returns the fixed response that refuses it (counted nowhere).
    func admit(_ connection: RelayConnection) -> String? {
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
        guard let source = connection.source else { return }
        let key = ObjectIdentifier(connection)
        if waitingBySource[source]?.removeValue(forKey: key) != nil, waitingBySource[source]?.isEmpty == true {
            waitingBySource[source] = nil
        }
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
        // A tunnel leaves the count once joined or closed (a joiner that leaves before its upgrade
        // completes does not bring it back).
        guard var waiting = waitingBySource[source] else { return nil }
        waiting = waiting.filter { _, tunnel in !tunnel.isClosed && tunnel.joinerSlotIsFree }
        waitingBySource[source] = waiting.isEmpty ? nil : waiting
        guard waiting.count >= maxWaitingTunnelsPerSource else { return nil }
        return RelayRejection(
            status: .tooManyRequests,
            reason: "too many unjoined tunnels from this address (\(maxWaitingTunnelsPerSource)); try again later"
        )
    }

    /// `connection` opened `tunnel` as its creator: it counts as waiting until someone joins it.
    func tunnelOpened(_ tunnel: RelayTunnel, by connection: RelayConnection) {
        guard maxWaitingTunnelsPerSource > 0, let source = connection.source, connection.admission != .notCounted else {
            return
        }
        waitingBySource[source, default: [:]][ObjectIdentifier(connection)] = tunnel
    }

    static func pendingRefusal(_ cap: Int) -> String {
        OverCapacityHandler.fixedResponse(
            status: "503 Service Unavailable",
            body: "too many connections awaiting their upgrade (\(cap)); try again later")
    }

    static func sourceRefusal(_ cap: Int) -> String {
        OverCapacityHandler.fixedResponse(
            status: "429 Too Many Requests", body: "too many connections from this address (\(cap))")
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
    }
    private let state = Mutex(State())

    init() {}

    /// Counts one more connection from `source`, or returns the fixed response of the cap that refuses it.
    func admit(source: String?, maxPending: Int, maxPerSource: Int) -> String? {
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
}
