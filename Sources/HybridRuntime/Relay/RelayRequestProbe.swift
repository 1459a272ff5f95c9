import Logging
import NIOCore
import NIOEmbedded

/// Feeds raw bytes to one relay connection's real pipeline (HTTP parser, upgrade decision, path and
/// header checks, WebSocket frame checks) on an `EmbeddedChannel`, with no socket: the fuzz target
/// for the relay's request path and headers (`Docs/ROBUSTNESS.md`).
package enum RelayRequestProbe {
    /// What the relay did with one connection's bytes.
    package struct Outcome: Sendable {
        /// Everything the relay wrote back.
        package var response: [UInt8]
        /// Connections and tunnels still open after the connection closed and every timer ran
        /// (both must be 0).
        package var leftoverConnections: Int
        package var leftoverTunnels: Int
    }

    /// Runs `bytes` as the whole of one client's input, then closes the connection, runs every
    /// timer (upgrade, contact wait, close handshake) and reports what was written and left over.
    package static func run(_ bytes: [UInt8], configuration: RelayConfiguration = RelayConfiguration()) -> Outcome {
        let channel = EmbeddedChannel()
        let statistics = RelayStatisticsBox()
        let registry = RelayRegistry(
            eventLoop: channel.embeddedEventLoop, configuration: configuration, statistics: statistics,
            logger: Logger(label: "relay-probe", factory: { _ in SwiftLogNoOpLogHandler() }))
        var response: [UInt8] = []
        func drain() {
            while let buffer = try? channel.readOutbound(as: ByteBuffer.self) {
                response += buffer.readableBytesView
            }
        }
        do {
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40000)).wait()
            try RelayConnection.configure(channel, registry: registry)
            try channel.writeInbound(channel.allocator.buffer(bytes: bytes))
        } catch {
            // Parser errors close the connection; what was written so far is the answer.
        }
        drain()
        channel.embeddedEventLoop.advanceTime(by: .seconds(600))
        drain()
        _ = try? channel.close().wait()
        channel.embeddedEventLoop.advanceTime(by: .seconds(600))
        drain()
        _ = try? channel.finish()
        let value = statistics.value
        return Outcome(response: response, leftoverConnections: value.openConnections, leftoverTunnels: value.openTunnels)
    }
}
