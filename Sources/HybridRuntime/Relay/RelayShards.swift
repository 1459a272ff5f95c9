import HybridCore
import NIOCore

/// The relay's shards: one ``RelayRegistry`` per event loop, each owning its tunnels, connections
/// and timers without locks. A tunnel lives in one shard and both of its peers' connections run on
/// that shard's loop (``RelayDispatcher`` places them; a relay with one shard accepts on its loop,
/// ``RelayLoopAcceptor``).
///
/// Which shard owns what:
/// - a `/cable/new/{tunnel ID}` tunnel: the shard its tunnel ID names (``shard(ofTunnelID:count:)``),
///   so a second request for the same tunnel ID meets the first one (409);
/// - its routing ID then names that shard too (``shard(of:count:)``: the last byte modulo the shard
///   count), so `/cable/connect/{routing ID}/…` lands where the tunnel lives;
/// - the linked-phone directory (`/cable/listen`, `/cable/contact`) and the tunnels of contact
///   requests: shard ``directoryShard``.
///
/// The limits over the whole relay (``RelayConfiguration/maxConnections``,
/// ``RelayConfiguration/maxOpenTunnels``) are counted in ``RelayStatisticsBox`` with atomics.
final class RelayShards: Sendable {
    /// The registries, by shard index.
    let registries: [NIOLoopBound<RelayRegistry>]
    /// The relay's configuration.
    let configuration: RelayConfiguration
    /// The counters every shard shares.
    let statistics: RelayStatisticsBox

    /// The shard of the linked-phone directory.
    static let directoryShard = 0

    /// What the relay's connections read into: starts small (a relayed caBLE message is tens to a
    /// few hundred bytes, an upgrade request a few hundred) and grows for larger messages. A channel
    /// keeps its last receive buffer, so this is most of a quiet connection's memory.
    static let receiveAllocator = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65536)

    /// The relay-wide pending-upgrade and per-source counts, shared with every shard's registry.
    let admissionCounts: AdmissionCounts
    /// The episodes of failed accepts (no descriptors left), logged once each: the dispatcher's and
    /// the one-shard acceptor's.
    let acceptFailures: AcceptFailures

    init(
        registries: [NIOLoopBound<RelayRegistry>], configuration: RelayConfiguration, statistics: RelayStatisticsBox,
        admissionCounts: AdmissionCounts, acceptFailures: AcceptFailures = AcceptFailures { _ in }
    ) {
        precondition(!registries.isEmpty && registries.count <= 256, "1 to 256 shards")
        self.registries = registries
        self.admissionCounts = admissionCounts
        self.acceptFailures = acceptFailures
        self.configuration = configuration
        self.statistics = statistics
    }

    /// The shard a routing ID names: its last byte modulo `count`.
    static func shard(of routingID: [UInt8], count: Int) -> Int {
        Int(routingID.last ?? 0) % count
    }

    /// The shard of a `/cable/new` tunnel ID: its first byte modulo `count`.
    static func shard(ofTunnelID tunnelID: [UInt8], count: Int) -> Int {
        Int(tunnelID.first ?? 0) % count
    }

    /// Sets the last byte of `routingID` so that it names shard `index` of `count`, keeping it as
    /// random as the shard count allows.
    static func mark(_ routingID: inout [UInt8], shard index: Int, count: Int) {
        guard count > 1, let last = routingID.last else { return }
        var value = Int(last) - Int(last) % count + index
        if value > 255 { value -= count }
        routingID[routingID.count - 1] = UInt8(value)
    }

    /// Counts a connection the dispatcher accepted; `false` (not counted) when
    /// ``RelayConfiguration/maxConnections`` are open.
    func connectionAccepted() -> Bool {
        statistics.claimConnection(max: configuration.maxConnections)
    }

    /// A counted connection was closed before any shard took it.
    func connectionDropped() {
        statistics.releaseConnection()
    }
}
