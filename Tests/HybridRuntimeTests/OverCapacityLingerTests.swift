import Foundation
@testable import HybridRuntime
import HybridTestSupport
import Logging
import NIOCore
import NIOEmbedded
import NIOPosix
import Testing

/// A refused connection waits for its client to close, up to the close timeout; a crowd of them (a
/// burst at the open-file limit) must not hold the descriptors the next accepts need.
@Suite("Relay: refused connections in a crowd", .timeLimit(.minutes(1)))
struct OverCapacityLingerTests {
    @Test("past 16 refused connections waiting for their clients, a new one is answered and dropped 100 ms later; the rest wait out the close timeout")
    func crowdedRefusalsLingerBriefly() async throws {
        let lingering = OverCapacityHandler.Lingering()
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(OverCapacityHandler(closeTimeout: .seconds(8), lingering: lingering))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(server.localAddress?.port)
        // Clients that read the answer and then stay silent, never closing: as a burst of them does.
        var clients: [Int32] = []
        defer { for fd in clients { close(fd) } }
        for _ in 0...OverCapacityHandler.Lingering.crowd {
            let fd = try #require(LoopbackSocket.connect(port: port, ioTimeout: 5))
            clients.append(fd)
            #expect(LoopbackSocket.receive(fd, until: "\r\n\r\n").hasPrefix("HTTP/1.1 503 Service Unavailable"))
        }
        // Condition polls with deadlines: the 17th is dropped after 100 ms, the first 16 after 8 s.
        let deadline = ContinuousClock.now + .seconds(6)
        while lingering.waiting > OverCapacityHandler.Lingering.crowd, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(lingering.waiting == OverCapacityHandler.Lingering.crowd)
        let end = ContinuousClock.now + .seconds(20)
        while lingering.waiting > 0, ContinuousClock.now < end { try await Task.sleep(for: .milliseconds(50)) }
        #expect(lingering.waiting == 0)
        try await server.close().get()
    }
    @Test("a connection the dispatcher accepted while the relay was full is answered 503 on the shard it went to, even with room there now: it was never routed, so it is not served")
    func overCapacityIsNeverServed() throws {
        let channel = EmbeddedChannel()
        let statistics = RelayStatisticsBox()
        let registry = RelayRegistry(
            eventLoop: channel.embeddedEventLoop, configuration: RelayConfiguration(), statistics: statistics,
            logger: Logger(label: "over-capacity", factory: { _ in SwiftLogNoOpLogHandler() }))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40000)).wait()
        try RelayConnection.configure(channel, registry: registry, counted: false, admission: .overCapacity)
        // The request is not read: not even a routable one (it may belong to another shard).
        try channel.writeInbound(ByteBuffer(string: "GET /cable/listen/AAAA HTTP/1.1\r\nHost: x\r\n\r\n"))
        let answer = String(buffer: try #require(try channel.readOutbound(as: ByteBuffer.self)))
        #expect(answer.hasPrefix("HTTP/1.1 503 Service Unavailable"), "\(answer)")
        #expect(statistics.openConnectionCount == 0, "not counted as an open connection")
        #expect(statistics.value.rejectedRequests[503] == 1)
        _ = try? channel.finish()
    }
}
