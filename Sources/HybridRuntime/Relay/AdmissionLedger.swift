import HybridCore
import NIOCore
import NIOHTTP1

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
/// pending but belong to no source. Confined to the relay's event loop.
final class AdmissionLedger {
    private let maxPendingUpgrades: Int
    private let maxConnectionsPerSource: Int
    private let maxWaitingTunnelsPerSource: Int

    /// Returns freed memory to the system when the relay falls idle (it sees every close).
    let idleTrim = IdleMemoryTrim()

    /// Connections admitted and not yet upgraded (nor closed).
    private(set) var pendingUpgrades = 0
    private var connectionsBySource: [String: Int] = [:]
    /// Tunnels opened by each source that were not joined when last looked at, by their creator's connection.
    private var waitingBySource: [String: [ObjectIdentifier: RelayTunnel]] = [:]

    init(configuration: RelayConfiguration) {
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
        if maxPendingUpgrades > 0, pendingUpgrades >= maxPendingUpgrades {
            return Self.pendingRefusal(maxPendingUpgrades)
        }
        if let source = connection.source, maxConnectionsPerSource > 0,
            connectionsBySource[source, default: 0] >= maxConnectionsPerSource
        {
            return Self.sourceRefusal(maxConnectionsPerSource)
        }
        connection.admission = .pending
        pendingUpgrades += 1
        if let source = connection.source { connectionsBySource[source, default: 0] += 1 }
        return nil
    }

    /// `connection` finished its upgrade: it no longer counts as pending.
    func upgraded(_ connection: RelayConnection) {
        guard connection.admission == .pending else { return }
        connection.admission = .upgraded
        pendingUpgrades -= 1
    }

    /// `connection` closed: release whatever it counted for.
    func closed(_ connection: RelayConnection) {
        switch connection.admission {
        case .notCounted:
            return
        case .pending:
            pendingUpgrades -= 1
        case .upgraded:
            break
        }
        connection.admission = .notCounted
        guard let source = connection.source else { return }
        if let count = connectionsBySource[source], count > 1 {
            connectionsBySource[source] = count - 1
        } else {
            connectionsBySource[source] = nil
        }
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
