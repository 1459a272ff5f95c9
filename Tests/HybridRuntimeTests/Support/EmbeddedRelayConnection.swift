@testable import HybridRuntime
import Logging
import NIOCore
import NIOEmbedded

/// One relay connection's real pipeline on an `EmbeddedChannel` (connected from 127.0.0.1, default
/// configuration, its own shard registry on the channel's loop), for tests that drive the loop's
/// virtual clock or a handler's re-entrancy by hand.
func embeddedRelayConnection(label: String) throws -> (channel: EmbeddedChannel, registry: RelayRegistry) {
    let channel = EmbeddedChannel()
    let registry = RelayRegistry(
        eventLoop: channel.embeddedEventLoop, configuration: RelayConfiguration(), statistics: RelayStatisticsBox(),
        logger: Logger(label: label, factory: { _ in SwiftLogNoOpLogHandler() }))
    try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40000)).wait()
    try RelayConnection.configure(channel, registry: registry)
    return (channel, registry)
}
