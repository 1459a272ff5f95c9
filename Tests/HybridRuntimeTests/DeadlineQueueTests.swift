import HybridCore
import Logging
import NIOCore
import NIOEmbedded
import Testing

@testable import HybridRuntime

/// `DeadlineQueue`: a shard's upgrade timeouts and closing handshakes, each in one first-in-first-out
/// queue with one timer.
@Suite("Relay: deadline queues (one queue and one timer per shard)")
struct DeadlineQueueTests {
    /// Objects whose identities name distinct connections for as long as the test holds them.
    private final class Connection {}

    @Test("the timer's granularity is a twentieth of the timeout, at most 100 ms")
    func granularity() {
        #expect(DeadlineQueue<UpgradeWaiter>(duration: .milliseconds(200)).granularity == .milliseconds(10))
        #expect(DeadlineQueue<UpgradeWaiter>(duration: .seconds(1)).granularity == .milliseconds(50))
        #expect(DeadlineQueue<UpgradeWaiter>(duration: .seconds(10)).granularity == .milliseconds(100))
    }

    @Test("entries fall due in order; the timer is armed for the first and re-armed for the oldest left, one granularity on at the soonest")
    func dueInOrder() {
        let loop = EmbeddedEventLoop()
        var armed: [NIODeadline] = []
        let arm: (NIODeadline) -> Scheduled<Void> = { deadline in
            armed.append(deadline)
            return loop.scheduleTask(deadline: deadline) {}
        }
        var deadlines = DeadlineQueue<UpgradeWaiter>(duration: .milliseconds(200))  // granularity 10 ms
        let connections = (0..<4).map { _ in Connection() }
        let ids = connections.map(ObjectIdentifier.init)
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        let offsets: [Int64] = [200, 201, 250, 400]
        for (index, offset) in offsets.enumerated() {
            deadlines.add(UpgradeWaiter(connection: ids[index], serial: UInt64(index + 1)), deadline: start + .milliseconds(offset), arm: arm)
        }
        #expect(armed == [start + .milliseconds(200)], "one timer, for the first deadline")
        #expect(deadlines.count == 4)

        let first = deadlines.due(at: start + .milliseconds(200), arm: arm)
        #expect(first.map(\.serial) == [1])
        #expect(first.map(\.connection) == [ids[0]])
        #expect(armed.last == start + .milliseconds(210), "the next deadline is 1 ms on: the timer waits a granularity")

        #expect(deadlines.due(at: start + .milliseconds(210), arm: arm).map(\.serial) == [2])
        #expect(armed.last == start + .milliseconds(250))

        #expect(deadlines.due(at: start + .milliseconds(260), arm: arm).map(\.serial) == [3])
        #expect(armed.last == start + .milliseconds(400))

        let armedBefore = armed.count
        #expect(deadlines.due(at: start + .milliseconds(400), arm: arm).map(\.serial) == [4])
        #expect(armed.count == armedBefore, "nothing left: no timer")
        #expect(deadlines.count == 0)

        deadlines.add(UpgradeWaiter(connection: ids[0], serial: 5), deadline: start + .milliseconds(900), arm: arm)
        #expect(armed.last == start + .milliseconds(900), "the first entry after an empty queue arms the timer again")
        withExtendedLifetime(connections) {}
    }

    /// A 10 s queue holding `count` waiters with serials 1… due 1 s apart from `start`, and the
    /// timer's arming function (on an embedded loop the test never runs).
    private static func filled(
        _ count: Int, start: NIODeadline, connections: [Connection]
    ) -> (DeadlineQueue<UpgradeWaiter>, (NIODeadline) -> Scheduled<Void>) {
        let loop = EmbeddedEventLoop()
        let arm: (NIODeadline) -> Scheduled<Void> = { loop.scheduleTask(deadline: $0) {} }
        var deadlines = DeadlineQueue<UpgradeWaiter>(duration: .seconds(10))
        for (index, connection) in connections.prefix(count).enumerated() {
            let waiter = UpgradeWaiter(connection: ObjectIdentifier(connection), serial: UInt64(index + 1))
            deadlines.add(waiter, deadline: start + .seconds(Int64(index)), arm: arm)
        }
        return (deadlines, arm)
    }

    @Test("nothing falls due early, and a late timer takes every entry due at once")
    func lateTimer() {
        let connections = (0..<3).map { _ in Connection() }
        let start = NIODeadline.uptimeNanoseconds(5_000_000_000)
        var (deadlines, arm) = Self.filled(3, start: start, connections: connections)
        #expect(deadlines.due(at: start - .nanoseconds(1), arm: arm).isEmpty)
        #expect(deadlines.due(at: start + .seconds(5), arm: arm).map(\.serial) == [1, 2, 3])
        #expect(deadlines.count == 0)
    }

    @Test("settled entries leave from the front only, up to the first connection still waiting")
    func dropSettled() {
        let connections = (0..<5).map { _ in Connection() }
        let start = NIODeadline.uptimeNanoseconds(5_000_000_000)
        var (deadlines, arm) = Self.filled(5, start: start, connections: connections)
        let waiting: Set<UInt64> = [3, 5]  // 1, 2 and 4 upgraded or closed
        deadlines.dropSettled { !waiting.contains($0.serial) }
        #expect(deadlines.count == 3, "1 and 2 left; 4 stays behind 3, which still waits")
        #expect(deadlines.due(at: start + .seconds(10), arm: arm).map(\.serial) == [3, 4, 5])
    }

    @Test("a shard on an EmbeddedEventLoop times connections by the loop's virtual clock: dropped one granularity after the timeout, not before")
    func loopClock() throws {
        let (channel, registry) = try embeddedRelayConnection(label: "test")
        try channel.writeInbound(channel.allocator.buffer(string: "GET /cable/new/"))  // and nothing more
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(9_990))
        #expect(channel.isActive, "still inside the 10 s upgrade timeout")
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(110))
        #expect(!channel.isActive, "dropped within a granularity (100 ms) of the deadline")
        #expect(registry.upgradeDeadlines.count == 0)
    }

    @Test("a peer that never answers the relay's close frame is dropped at the close-handshake timeout, not before")
    func closeHandshakeTimeout() async throws {
        var configuration = RelayConfiguration()
        configuration.closeHandshakeTimeout = .milliseconds(300)
        try await withRelay(configuration) { relay, endpoint in
            var peers: [(RawConnection, ContinuousClock.Instant)] = []
            for _ in 0..<2 {
                let raw = try await RawConnection.connect(port: endpoint.port)
                try await raw.write(RawConnection.upgradeRequest(path: TunnelServicePath.new(tunnelID: randomTunnelID()).path))
                #expect(RawConnection.status(of: await raw.readResponseHead()) == 101)
                // A text frame: the relay closes the tunnel with 1003 and waits for an answer that never comes.
                let start = ContinuousClock.now
                try await raw.write([0x81, 0x81, 1, 2, 3, 4, 0x41 ^ 1])
                peers.append((raw, start))
                try await Task.sleep(for: .milliseconds(100))
            }
            for (raw, start) in peers {
                #expect(await raw.waitForClose(timeout: .seconds(3)))
                #expect(ContinuousClock.now - start >= .milliseconds(300), "closed before the close-handshake timeout")
            }
            #expect(await eventually { relay.statistics.openConnections == 0 })
        }
    }

    @Test("stop cancels the timer and forgets every entry")
    func stop() throws {
        let loop = EmbeddedEventLoop()
        var fired = 0
        var deadlines = DeadlineQueue<UpgradeWaiter>(duration: .milliseconds(200))
        let connection = Connection()
        deadlines.add(UpgradeWaiter(connection: ObjectIdentifier(connection), serial: 1), deadline: .now() + .milliseconds(200)) { deadline in
            loop.scheduleTask(deadline: deadline) { fired += 1 }
        }
        deadlines.stop()
        #expect(deadlines.count == 0)
        loop.advanceTime(by: .seconds(1))
        #expect(fired == 0)
        try loop.syncShutdownGracefully()
    }
}
