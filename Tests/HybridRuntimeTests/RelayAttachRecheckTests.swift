import HybridCore
@testable import HybridRuntime
import Logging
import NIOCore
import NIOEmbedded
import Testing

/// The relay answers a joiner's upgrade with its 101 during a read and attaches the connection to
/// its tunnel only when the read is over (``RelayRequestHandler``). If the tunnel closed in between
/// (its creator went away), attaching must not revive it: the joiner gets the tunnel's close frame
/// at once (``RelayTunnel/attach(_:handler:)``'s re-check).
@Suite("Relay: a tunnel that closed between the 101 and the attach")
struct RelayAttachRecheckTests {
    private static func drain(_ channel: EmbeddedChannel) throws -> [UInt8] {
        var bytes: [UInt8] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { bytes += buffer.readableBytesView }
        return bytes
    }

    @Test("the creator leaves after the joiner's 101 was written and before it attached: the joiner gets close 1001, nothing stays open")
    func creatorLeavesBeforeAttach() throws {
        let loop = EmbeddedEventLoop()
        let statistics = RelayStatisticsBox()
        let registry = RelayRegistry(
            eventLoop: loop, configuration: RelayConfiguration(), statistics: statistics,
            logger: Logger(label: "attach-recheck", factory: { _ in SwiftLogNoOpLogHandler() }))
        func connection(port: Int) throws -> EmbeddedChannel {
            let channel = EmbeddedChannel(loop: loop)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: port)).wait()
            try RelayConnection.configure(channel, registry: registry)
            return channel
        }
        let tunnelID = [UInt8](repeating: 0x5A, count: HybridConstants.tunnelIDSize)
        let creator = try connection(port: 40001)
        try creator.writeInbound(
            creator.allocator.buffer(string: WebSocketUpgradeRequest.text(path: TunnelServicePath.new(tunnelID: tunnelID).path)))
        let created = try Self.drain(creator)
        #expect(HostileWire.status(created) == 101)
        let routingID = try #require(HostileWire.routingID(created))

        // The joiner's request is read (the 101 goes out), and the read is not over yet.
        let joiner = try connection(port: 40002)
        let request = WebSocketUpgradeRequest.text(path: TunnelServicePath.connect(routingID: routingID, tunnelID: tunnelID).path)
        joiner.pipeline.fireChannelRead(NIOAny(joiner.allocator.buffer(string: request)))
        let switched = try Self.drain(joiner)
        #expect(HostileWire.status(switched) == 101, "\(String(decoding: switched, as: UTF8.self))")

        // The creator goes away; then the joiner's read ends and it attaches to the closed tunnel.
        try creator.close().wait()
        joiner.pipeline.fireChannelReadComplete()
        let frames = HostileWire.frames(in: try Self.drain(joiner), from: 0)
        #expect(frames.count == 1 && frames.first?.opcode == 0x8, "one close frame: \(frames)")
        let payload = Array(frames.first?.payload ?? [])
        #expect(payload.count >= 2 && Int(payload[0]) << 8 | Int(payload[1]) == 1001, "close code 1001 (going away): \(payload)")

        loop.advanceTime(by: .seconds(600))
        _ = try? joiner.close().wait()
        loop.advanceTime(by: .seconds(600))
        #expect(statistics.value.openTunnels == 0 && statistics.value.openConnections == 0, "\(statistics.value)")
        _ = try? joiner.finish()
        _ = try? creator.finish()
    }
}
