import HybridCore
@testable import HybridRuntime
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// Everything of a sign-in on one event loop (`hybrid-sim bench`'s layout), writes made in place
/// from a task on the connection's loop, and batched sends.
@Suite("One event loop: in-place writes and batched sends", .timeLimit(.minutes(1)))
struct SingleLoopTests {
    /// A relay whose one shard runs on `loop`, and both ends of a tunnel connected on it.
    private static func withTunnelOnOneLoop(
        _ loop: EventLoop, _ body: (TunnelRelay, TunnelEnds) async throws -> Void
    ) async throws {
        let relay = TunnelRelay(group: loop)
        let endpoint = try await relay.start()
        do {
            let tunnelID = randomTunnelID()
            let phone = try await WebSocketTunnel.open(
                url: endpoint.url + TunnelServicePath.new(tunnelID: tunnelID).path, group: loop)
            let routingID = try #require(phone.routingID)
            let desktop = try await WebSocketTunnel.open(
                url: endpoint.url + TunnelServicePath.connect(routingID: routingID, tunnelID: tunnelID).path, group: loop)
            try await body(relay, TunnelEnds(phone: phone, desktop: desktop, tunnelID: tunnelID))
            await relay.shutdown()
        } catch {
            await relay.shutdown()
            throw error
        }
    }

    @Test("sends from a task on the connection's loop arrive whole and in order, single and batched")
    func inPlaceSends() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        try await Self.withTunnelOnOneLoop(loop) { relay, ends in
            let onLoop = try await withTaskExecutorPreference(EventLoopTaskExecutor(loop)) {
                let here = loop.inEventLoop
                try await ends.desktop.send([0x01])
                try await ends.desktop.send(contentsOf: [[0x02, 0x02], [], [0x03, 0x03, 0x03]])
                try await ends.desktop.send(contentsOf: [])
                return here
            }
            #expect(onLoop, "the sends ran on the connection's loop (the in-place path)")
            var received: [[UInt8]] = []
            for _ in 0..<4 { received.append(try await ends.phone.receive(timeout: .seconds(5))) }
            #expect(received == [[0x01], [0x02, 0x02], [], [0x03, 0x03, 0x03]])
            // And back, from a task off the loop.
            try await ends.phone.send(contentsOf: [[0xA0], [0xB0, 0xB1]])
            #expect(try await ends.desktop.receive(timeout: .seconds(5)) == [0xA0])
            #expect(try await ends.desktop.receive(timeout: .seconds(5)) == [0xB0, 0xB1])
            #expect(relay.statistics.messagesRelayed == 6)
            await ends.close()
        }
    }

    @Test("a batch on a closed tunnel throws .closed, on the loop and off it")
    func batchAfterClose() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        try await Self.withTunnelOnOneLoop(loop) { _, ends in
            await ends.desktop.close()
            await expectRuntimeError(.closed) { try await ends.desktop.send(contentsOf: [[0x01], [0x02]]) }
            await withTaskExecutorPreference(EventLoopTaskExecutor(loop)) {
                await expectRuntimeError(.closed) { try await ends.desktop.send(contentsOf: [[0x01]]) }
                await expectRuntimeError(.closed) { try await ends.desktop.send([0x01]) }
            }
            // The phone learns of the close after nothing else arrived.
            await expectRuntimeError(.closed) { _ = try await ends.phone.receive(timeout: .seconds(5)) }
            await ends.phone.close()
        }
    }

    @Test("the default batched send (in-memory tunnel) delivers the messages one by one, in order")
    func defaultBatch() async throws {
        let (a, b) = InMemoryTunnel.pair()
        try await a.send(contentsOf: [[1], [2, 2], [3]])
        for expected: [UInt8] in [[1], [2, 2], [3]] {
            #expect(try await b.receive(timeout: .seconds(1)) == expected)
        }
        await a.close()
        await expectRuntimeError(.closed) { try await a.send(contentsOf: [[4]]) }
    }

    @Test("a harness on one event loop registers and signs in, drivers on that loop, and leaves nothing open")
    func harnessOnOneLoop() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let harness = try await HybridHarness.start(group: loop, logger: quietLogger)
        let phone = SimulatedPhone()
        let rp = RelyingParty(id: "loop.example", origin: "https://loop.example")
        try await withTaskExecutorPreference(EventLoopTaskExecutor(loop)) {
            let registered = try await harness.register(on: phone, relyingParty: rp, userName: "loop")
            var credential = registered
            for _ in 0..<3 {
                credential = try await harness.signIn(on: phone, relyingParty: rp, knownCredentials: [credential])
            }
            #expect(credential.signCount == registered.signCount + 3)
        }
        #expect(harness.relay.statistics.tunnelsJoined == 4)
        #expect(await eventually { harness.relay.openTunnelCount == 0 && harness.relay.statistics.openConnections == 0 })
        await harness.shutdown()
    }

    @Test("a harness on one loop runs both sides' drivers on it (their task executor) though the caller prefers none; on a group, it prefers none")
    func harnessDriversPreferItsLoop() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let rp = RelyingParty(id: "loop.example", origin: "https://loop.example")
        for group in [loop, MultiThreadedEventLoopGroup.singleton] as [any EventLoopGroup] {
            let harness = try await HybridHarness.start(group: group, logger: quietLogger)
            let onLoop = Mutex<[Bool]>([])
            var options = HybridHarness.TransactionOptions()
            options.events = { _ in
                let here = MultiThreadedEventLoopGroup.currentEventLoop.map { $0 === loop } ?? false
                onLoop.withLock { $0.append(here) }
            }
            _ = try await harness.register(on: SimulatedPhone(), relyingParty: rp, userName: "loop", options: options)
            await harness.shutdown()
            let seen = onLoop.withLock { $0 }
            #expect(seen.count > 10, "both sides' progress events")
            if group === loop {
                #expect(seen.allSatisfy { $0 }, "every event on the harness's loop: \(seen)")
                #expect(harness.taskExecutor?.eventLoop === loop)
            } else {
                #expect(harness.taskExecutor == nil)
            }
        }
    }
}
