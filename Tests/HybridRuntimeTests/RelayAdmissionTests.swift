import HybridCore
@testable import HybridRuntime
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// The admission caps against hostile clients (`AdmissionLedger`): connections awaiting their
/// upgrade, connections per source address, unjoined tunnels per source address. Each test shows
/// the specific refusal and that honest traffic (from 127.0.0.1, or already upgraded) still passes.
@Suite("Relay admission caps")
struct RelayAdmissionTests {
    /// A raw connection from `source` to the relay.
    private func connect(_ endpoint: RelayEndpoint, from source: String) async throws -> HostileConnection {
        try await HostileConnection.open(host: endpoint.host, port: endpoint.port, source: source, timeout: .seconds(3))
    }

    /// Sends an upgrade request for `path` and returns the whole response head and what followed.
    private func upgrade(_ connection: HostileConnection, _ path: String) async -> [UInt8] {
        await connection.write(HostileWire.upgradeRequest(path: path))
        return await connection.wait(timeout: .seconds(3)) { HostileWire.headEnd($0) != nil }.bytes
    }

    /// Waits until the relay closed the connection and returns everything it sent, as text.
    private func refusal(_ connection: HostileConnection) async -> String {
        String(decoding: await connection.wait(timeout: .seconds(3)).bytes, as: UTF8.self)
    }

    @Test("beyond maxPendingUpgrades a new connection gets 503 at once; upgraded tunnels keep relaying")
    func pendingUpgrades() async throws {
        var configuration = RelayConfiguration()
        configuration.maxPendingUpgrades = 3
        try await withRelay(configuration) { relay, endpoint in
            let honest = try await openTunnel(endpoint)  // upgraded: not pending
            var silent: [HostileConnection] = []
            for _ in 0..<3 { silent.append(try await connect(endpoint, from: "127.0.0.1")) }
            #expect(await eventually { relay.statistics.openConnections == 5 })

            let refused = try await connect(endpoint, from: "127.0.0.1")
            let answer = await refusal(refused)
            #expect(answer.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"), "\(answer)")
            #expect(answer.contains("too many connections awaiting their upgrade (3)"), "\(answer)")
            #expect(await refused.wait(timeout: .seconds(3)).end != nil, "the refused connection is closed")
            #expect(relay.statistics.rejectedRequests[503] == 1)

            try await honest.phone.send([1, 2, 3])
            #expect(try await honest.desktop.receive(timeout: .seconds(2)) == [1, 2, 3])

            // One silent connection goes away: its slot is free again for an honest upgrade.
            await silent[0].close()
            #expect(await eventually { relay.statistics.openConnections == 4 })
            let again = try await openTunnel(endpoint)
            try await again.desktop.send([4])
            #expect(try await again.phone.receive(timeout: .seconds(2)) == [4])
            for connection in silent { await connection.close() }
            await refused.close()
            await honest.close()
            await again.close()
        }
    }

    @Test("beyond maxConnectionsPerSource one address gets 429; other addresses still upgrade")
    func connectionsPerSource() async throws {
        var configuration = RelayConfiguration()
        configuration.maxConnectionsPerSource = 2
        try await withRelay(configuration) { relay, endpoint in
            let first = try await connect(endpoint, from: "127.0.0.2")
            let second = try await connect(endpoint, from: "127.0.0.2")
            #expect(await eventually { relay.statistics.openConnections == 2 })

            let third = try await connect(endpoint, from: "127.0.0.2")
            let answer = await refusal(third)
            #expect(answer.hasPrefix("HTTP/1.1 429 Too Many Requests\r\n"), "\(answer)")
            #expect(answer.contains("too many connections from this address (2)"), "\(answer)")
            #expect(relay.statistics.rejectedRequests[429] == 1)

            // 127.0.0.1 is another source: a whole tunnel (two connections) goes through.
            let honest = try await openTunnel(endpoint)
            try await honest.phone.send([9])
            #expect(try await honest.desktop.receive(timeout: .seconds(2)) == [9])

            // After one of 127.0.0.2's connections closes, it may upgrade again.
            await first.close()
            #expect(await eventually { relay.statistics.openConnections == 3 })
            let fourth = try await connect(endpoint, from: "127.0.0.2")
            #expect(HostileWire.status(await upgrade(fourth, HostileWire.randomNewPath())) == 101)
            for connection in [second, third, fourth] { await connection.close() }
            await honest.close()
        }
    }

    @Test("beyond maxWaitingTunnelsPerSource /cable/new gets 429 until one is joined; other addresses open tunnels")
    func waitingTunnelsPerSource() async throws {
        var configuration = RelayConfiguration()
        configuration.maxWaitingTunnelsPerSource = 2
        // Two loops, and the two tunnels land on different ones (a /cable/new goes to the shard its
        // tunnel ID's first byte names): the count is the relay's, not a loop's.
        configuration.eventLoops = 2
        try await withRelay(configuration) { relay, endpoint in
            var creators: [(connection: HostileConnection, tunnelID: [UInt8], routingID: [UInt8])] = []
            for shard in 0..<2 {
                let tunnelID = [UInt8(shard)] + HostileWire.randomBytes(15)
                let connection = try await connect(endpoint, from: "127.0.0.3")
                let response = await upgrade(connection, TunnelServicePath.new(tunnelID: tunnelID).path)
                #expect(HostileWire.status(response) == 101)
                creators.append((connection, tunnelID, try #require(HostileWire.routingID(response))))
            }

            let refused = try await connect(endpoint, from: "127.0.0.3")
            let response = await upgrade(refused, HostileWire.randomNewPath())
            #expect(HostileWire.status(response) == 429, "\(String(decoding: response, as: UTF8.self))")
            #expect(await refusal(refused).contains("too many unjoined tunnels from this address (2)"))
            #expect(relay.statistics.rejectedRequests[429] == 1)
            #expect(relay.openTunnelCount == 2, "the refused request opened no tunnel")

            // An honest QR tunnel from 127.0.0.1 is not affected.
            let honest = try await openTunnel(endpoint)
            try await honest.desktop.send([7])
            #expect(try await honest.phone.receive(timeout: .seconds(2)) == [7])

            // Someone joins one of 127.0.0.3's tunnels: it no longer counts, so a new one may open.
            let joiner = try await WebSocketTunnel.open(
                url: endpoint.url
                    + TunnelServicePath.connect(routingID: creators[0].routingID, tunnelID: creators[0].tunnelID).path,
                timeout: .seconds(3))
            let next = try await connect(endpoint, from: "127.0.0.3")
            #expect(HostileWire.status(await upgrade(next, HostileWire.randomNewPath())) == 101)

            // A /cable/connect from the same address is never counted.
            let storm = try await connect(endpoint, from: "127.0.0.3")
            #expect(HostileWire.status(await upgrade(storm, HostileWire.randomConnectPath())) == 404)
            for creator in creators { await creator.connection.close() }
            for connection in [refused, next, storm] { await connection.close() }
            await joiner.close()
            await honest.close()
            #expect(await eventually { relay.openTunnelCount == 0 })
            #expect(relay.admissionCountsForTests?.waitingTunnels(source: "127.0.0.3") == 0)
        }
    }

    @Test("a /cable/new refused for another reason (duplicate tunnel ID) or closed early gives its place back")
    func waitingTunnelReservationReleased() async throws {
        var configuration = RelayConfiguration()
        configuration.maxWaitingTunnelsPerSource = 2
        configuration.eventLoops = 2
        try await withRelay(configuration) { relay, endpoint in
            let tunnelID = HostileWire.randomBytes(16)
            let first = try await connect(endpoint, from: "127.0.0.4")
            #expect(HostileWire.status(await upgrade(first, TunnelServicePath.new(tunnelID: tunnelID).path)) == 101)
            // The same tunnel ID again: 409, and the place it reserved is released.
            for _ in 0..<3 {
                let duplicate = try await connect(endpoint, from: "127.0.0.4")
                #expect(HostileWire.status(await upgrade(duplicate, TunnelServicePath.new(tunnelID: tunnelID).path)) == 409)
                await duplicate.close()
            }
            #expect(relay.admissionCountsForTests?.waitingTunnels(source: "127.0.0.4") == 1)
            let second = try await connect(endpoint, from: "127.0.0.4")
            #expect(HostileWire.status(await upgrade(second, HostileWire.randomNewPath())) == 101)
            let third = try await connect(endpoint, from: "127.0.0.4")
            #expect(HostileWire.status(await upgrade(third, HostileWire.randomNewPath())) == 429)
            // A creator that leaves closes its tunnel: the place is free again.
            await first.close()
            #expect(await eventually { relay.admissionCountsForTests?.waitingTunnels(source: "127.0.0.4") == 1 })
            let fourth = try await connect(endpoint, from: "127.0.0.4")
            #expect(HostileWire.status(await upgrade(fourth, HostileWire.randomNewPath())) == 101)
            for connection in [second, third, fourth] { await connection.close() }
            #expect(await eventually { relay.admissionCountsForTests?.waitingTunnels(source: "127.0.0.4") == 0 })
        }
    }

    @Test("glibc's malloc_trim is found, so an idle relay can hand freed memory back")
    func mallocTrimFound() throws {
        _ = try #require(IdleMemoryTrim.mallocTrim, "malloc_trim not found in the C library")
    }

    @Test("the idle trim runs once after the last close, not when a connection opened meanwhile, not twice for two closes")
    func idleTrimScheduling() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let trims = Atomic<Int>(0)
        let open = Atomic<Int>(0)
        let trimmedAt = Mutex<NIODeadline?>(nil)
        let bound = try await loop.submit {
            NIOLoopBound(
                IdleMemoryTrim(delay: .milliseconds(100)) {
                    trimmedAt.withLock { $0 = $0 ?? .now() }
                    trims.add(1, ordering: .relaxed)
                }, eventLoop: loop)
        }.get()
        // Each step runs on the loop in one go, so the timer cannot fire in the middle of it however
        // slow the machine is. Returns when the closes happened.
        func closed(times: Int = 1, thenOpen: Bool = false) async throws -> NIODeadline {
            try await loop.submit {
                let before = NIODeadline.now()  // the timer is scheduled after this
                for _ in 0..<times { bound.value.connectionClosed(on: loop) { open.load(ordering: .relaxed) } }
                if thenOpen { open.store(1, ordering: .relaxed) }
                return before
            }.get()
        }
        // Two closes in a row: one trim, no sooner than the delay after them (a slow machine only
        // makes the gap longer).
        let closedAt = try await closed(times: 2)
        #expect(await eventually { trims.load(ordering: .relaxed) == 1 })
        let gap = try #require(trimmedAt.withLock { $0 }) - closedAt
        #expect(gap >= .milliseconds(100), "trimmed \(gap.nanoseconds / 1_000_000) ms after the closes")
        try await Task.sleep(for: .milliseconds(300))  // the window in which a second trim would show
        #expect(trims.load(ordering: .relaxed) == 1)
        // A connection opens before the delay is over: no trim.
        _ = try await closed(thenOpen: true)
        try await Task.sleep(for: .milliseconds(300))
        #expect(trims.load(ordering: .relaxed) == 1)
        // Closes while connections are open do not schedule one.
        _ = try await closed()
        open.store(0, ordering: .relaxed)
        try await Task.sleep(for: .milliseconds(300))
        #expect(trims.load(ordering: .relaxed) == 1)
    }

    @Test("a burst that ended while connections stay open is trimmed too: once the count falls to a quarter of a large enough peak; one within the spacing is put off, not dropped; shards share the spacing")
    func burstTrim() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let trims = Atomic<Int>(0)
        let open = Atomic<Int>(0)
        let clock = TrimClock()
        let bound = try await loop.submit {
            NIOLoopBound(
                IdleMemoryTrim(delay: .milliseconds(50), burst: 8, spacing: .milliseconds(800), clock: clock) {
                    trims.add(1, ordering: .relaxed)
                },
                eventLoop: loop)
        }.get()
        /// Closes connections one by one from `from` open down to `to` open.
        func close(from: Int, to: Int) async throws {
            for count in stride(from: from - 1, through: to, by: -1) {
                open.store(count, ordering: .relaxed)
                try await loop.submit { bound.value.connectionClosed(on: loop) { open.load(ordering: .relaxed) } }.get()
            }
        }
        // A small burst (peak 6 < 8) that leaves one connection open: no trim.
        try await close(from: 6, to: 1)
        try await Task.sleep(for: .milliseconds(200))
        #expect(trims.load(ordering: .relaxed) == 0)
        // A peak of 20 falling to 4 (≤ 20 / 4) with one connection still open: one trim.
        try await close(from: 20, to: 4)
        #expect(await eventually { trims.load(ordering: .relaxed) == 1 })
        // A second burst within the spacing: not at once, but once the spacing has passed, with
        // no close after it (a relay whose last connections stay open).
        try await close(from: 40, to: 2)
        try await Task.sleep(for: .milliseconds(200))
        #expect(trims.load(ordering: .relaxed) == 1, "not within the spacing")
        #expect(await eventually(timeout: .seconds(5)) { trims.load(ordering: .relaxed) == 2 }, "put off, not dropped")
        // Another shard's trimmer on the same clock: a burst right after is put off as well.
        #expect(clock.remaining(.milliseconds(800), now: .now()) > .zero)
        #expect(!clock.claim(.milliseconds(800), now: .now()))
        // The idle trim is never put off.
        try await close(from: 2, to: 0)
        #expect(await eventually { trims.load(ordering: .relaxed) == 3 })
    }

    @Test("the caps' defaults: 1024 pending upgrades, per-source caps off")
    func defaults() {
        let configuration = RelayConfiguration()
        #expect(configuration.maxPendingUpgrades == 1024)
        #expect(configuration.maxConnectionsPerSource == 0)
        #expect(configuration.maxWaitingTunnelsPerSource == 0)
    }
}
