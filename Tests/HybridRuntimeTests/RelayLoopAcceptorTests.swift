import HybridCore
import HybridTestSupport
@testable import HybridRuntime
import NIOCore
import NIOPosix
import Testing

/// A relay with one shard accepts on that shard's event loop (`RelayLoopAcceptor`) instead of
/// through `RelayDispatcher`'s thread. Every accept-time limit the dispatcher path enforces is
/// enforced here too: each cap test runs with one shard (the loop acceptor) and with two (the
/// dispatcher), and expects the same specific refusal.
@Suite("Relay: accepting on the single shard's loop")
struct RelayLoopAcceptorTests {
    private func configuration(shards: Int) -> RelayConfiguration {
        var configuration = RelayConfiguration()
        configuration.eventLoops = shards
        return configuration
    }

    /// A raw connection from `source` to the relay.
    private func connect(_ endpoint: RelayEndpoint, from source: String = "127.0.0.1") async throws -> HostileConnection {
        try await HostileConnection.open(host: endpoint.host, port: endpoint.port, source: source, timeout: .seconds(3))
    }

    /// Opens a QR tunnel and relays one message each way through it, then closes it.
    private func expectTunnelRelays(_ endpoint: RelayEndpoint) async throws {
        let tunnel = try await openTunnel(endpoint)
        try await tunnel.phone.send([1, 2, 3])
        #expect(try await tunnel.desktop.receive(timeout: .seconds(2)) == [1, 2, 3])
        try await tunnel.desktop.send([4])
        #expect(try await tunnel.phone.receive(timeout: .seconds(2)) == [4])
        await tunnel.close()
    }

    /// Sends an upgrade request for a fresh `/cable/new` on `connection`; returns the response status.
    private func upgradeStatus(_ connection: HostileConnection) async -> Int? {
        await connection.write(HostileWire.upgradeRequest(path: HostileWire.randomNewPath()))
        return HostileWire.status(await connection.wait(timeout: .seconds(3)) { HostileWire.headEnd($0) != nil }.bytes)
    }

    /// Expects the relay to answer `connection` with the fixed refusal `status` (its status line
    /// and `reason` in the body), unread, to close it, and to count it as refused once.
    private func expectRefusal(
        _ connection: HostileConnection, by relay: TunnelRelay, status: Int, statusLine: String, reason: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        let ended = await connection.wait(timeout: .seconds(3))
        let answer = String(decoding: ended.bytes, as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 \(statusLine)\r\n"), "\(answer)", sourceLocation: sourceLocation)
        #expect(answer.contains(reason), "\(answer)", sourceLocation: sourceLocation)
        #expect(ended.end != nil, "the refused connection is closed", sourceLocation: sourceLocation)
        #expect(relay.statistics.rejectedRequests[status] == 1, sourceLocation: sourceLocation)
    }

    @Test("one shard accepts on its loop with no dispatcher thread and relays a tunnel; two shards use the dispatcher")
    func acceptorChoice() async throws {
        try await withRelay(configuration(shards: 1)) { relay, endpoint in
            #expect(relay.acceptsThroughDispatcher == false)
            try await expectTunnelRelays(endpoint)
            #expect(relay.dispatcherPeekCount == 0, "no thread peeked at the requests")
            #expect(await eventually { relay.statistics.openConnections == 0 && relay.openTunnelCount == 0 })
        }
        try await withRelay(configuration(shards: 2), group: twoLoopGroup) { relay, _ in
            #expect(relay.acceptsThroughDispatcher == true)
        }
        #expect(TunnelRelay().acceptsThroughDispatcher == nil, "not running")
    }

    @Test("beyond maxConnections a connection gets 503 at once, unread; a freed slot takes a tunnel again", arguments: [1, 2])
    func connectionCap(shards: Int) async throws {
        var configuration = configuration(shards: shards)
        configuration.maxConnections = 3
        try await withRelay(configuration, group: twoLoopGroup) { relay, endpoint in
            var held: [HostileConnection] = []
            for _ in 0..<3 { held.append(try await connect(endpoint)) }
            #expect(await eventually { relay.statistics.openConnections == 3 })

            let refused = try await connect(endpoint)
            await expectRefusal(
                refused, by: relay, status: 503, statusLine: "503 Service Unavailable",
                reason: "too many connections; try again later")
            #expect(relay.statistics.openConnections == 3, "the refused connection was never counted")

            for connection in held.prefix(2) { await connection.close() }
            #expect(await eventually { relay.statistics.openConnections == 1 })
            try await expectTunnelRelays(endpoint)
            for connection in held + [refused] { await connection.close() }
            #expect(await eventually { relay.statistics.openConnections == 0 })
        }
    }

    @Test("a /cable/new whose joiner would find the relay full is refused 503 at once, not left to strand its phone; a joined tunnel gives its room back", arguments: [1, 2])
    func joinerRoom(shards: Int) async throws {
        var configuration = configuration(shards: shards)
        configuration.maxConnections = 4
        try await withRelay(configuration, group: twoLoopGroup) { relay, endpoint in
            // Two phones' tunnels, nobody joined: their two joiners take the other two connections.
            var phones: [HostileConnection] = []
            for _ in 0..<2 {
                let phone = try await connect(endpoint)
                #expect(await upgradeStatus(phone) == 101)
                phones.append(phone)
            }
            let third = try await connect(endpoint)
            await third.write(HostileWire.upgradeRequest(path: HostileWire.randomNewPath()))
            let answer = String(decoding: await third.wait(timeout: .seconds(3)) { HostileWire.headEnd($0) != nil }.bytes, as: UTF8.self)
            #expect(answer.hasPrefix("HTTP/1.1 503 "), "\(answer)")
            #expect(answer.contains("too many connections (4) to open a tunnel its peer could join"), "\(answer)")
            await third.close()
            for phone in phones { await phone.close() }
            #expect(await eventually { relay.statistics.openConnections == 0 && relay.openTunnelCount == 0 })
            // The room comes back: tunnels joined and closed leave none counted.
            for _ in 0..<3 { try await expectTunnelRelays(endpoint) }
            let again = [try await connect(endpoint), try await connect(endpoint)]
            for phone in again { #expect(await upgradeStatus(phone) == 101) }
            for phone in again { await phone.close() }
        }
    }

    @Test("beyond maxPendingUpgrades a silent connection's successor gets 503; closing one frees its slot", arguments: [1, 2])
    func pendingUpgradeCap(shards: Int) async throws {
        var configuration = configuration(shards: shards)
        configuration.maxPendingUpgrades = 2
        try await withRelay(configuration, group: twoLoopGroup) { relay, endpoint in
            let silent = [try await connect(endpoint), try await connect(endpoint)]
            #expect(await eventually { relay.statistics.openConnections == 2 })

            let refused = try await connect(endpoint)
            await expectRefusal(
                refused, by: relay, status: 503, statusLine: "503 Service Unavailable",
                reason: "too many connections awaiting their upgrade (2)")

            await silent[0].close()
            #expect(await eventually { relay.statistics.openConnections == 1 })
            let next = try await connect(endpoint)
            #expect(await upgradeStatus(next) == 101)
            for connection in silent + [refused, next] { await connection.close() }
            #expect(await eventually { relay.statistics.openConnections == 0 })
        }
    }

    @Test("beyond maxConnectionsPerSource one address gets 429; another address still connects", arguments: [1, 2])
    func perSourceCap(shards: Int) async throws {
        var configuration = configuration(shards: shards)
        configuration.maxConnectionsPerSource = 2
        try await withRelay(configuration, group: twoLoopGroup) { relay, endpoint in
            let held = [try await connect(endpoint, from: "127.0.0.2"), try await connect(endpoint, from: "127.0.0.2")]
            #expect(await eventually { relay.statistics.openConnections == 2 })

            let refused = try await connect(endpoint, from: "127.0.0.2")
            await expectRefusal(
                refused, by: relay, status: 429, statusLine: "429 Too Many Requests",
                reason: "too many connections from this address (2)")

            try await expectTunnelRelays(endpoint)  // from 127.0.0.1
            for connection in held + [refused] { await connection.close() }
            #expect(await eventually { relay.statistics.openConnections == 0 })
        }
    }

    @Test("a connection that sends nothing is closed at the upgrade timeout and its counts released", arguments: [1, 2])
    func silentConnectionTimesOut(shards: Int) async throws {
        var configuration = configuration(shards: shards)
        configuration.upgradeTimeout = .milliseconds(200)
        configuration.maxPendingUpgrades = 1
        try await withRelay(configuration, group: twoLoopGroup) { relay, endpoint in
            let silent = try await connect(endpoint)
            let start = ContinuousClock.now
            let ended = await silent.wait(timeout: .seconds(3))
            #expect(ended.end != nil, "the relay closed the silent connection")
            #expect(ended.bytes.isEmpty, "without a response")
            #expect(ContinuousClock.now - start < .seconds(3))
            #expect(await eventually { relay.statistics.openConnections == 0 })
            // Its pending-upgrade slot (the only one) is free again.
            let next = try await connect(endpoint)
            #expect(await upgradeStatus(next) == 101)
            await silent.close()
            await next.close()
        }
    }

    @Test("shutdown stops accepting, closes tunnels with 1001 and drops connections still in their request")
    func shutdown() async throws {
        let relay = TunnelRelay(configuration: configuration(shards: 1))
        let endpoint = try await relay.start()
        #expect(relay.acceptsThroughDispatcher == false)
        let tunnel = try await openTunnel(endpoint)
        let pending = try await connect(endpoint)
        await pending.write(Array("GET /cable/new/".utf8))
        #expect(await eventually { relay.statistics.openConnections == 3 })

        await relay.shutdown()
        for end in [tunnel.phone, tunnel.desktop] {
            let error = await expectRuntimeError(.closed) { _ = try await end.receive(timeout: .seconds(2)) }
            #expect(error?.closeCode == .goingAway)
        }
        #expect(await pending.wait(timeout: .seconds(3)).end != nil)
        #expect(relay.statistics.openConnections == 0)
        #expect(relay.acceptsThroughDispatcher == nil)
        await expectRuntimeError(.connectionFailed) {
            _ = try await WebSocketTunnel.open(url: endpoint.url + TunnelServicePath.new(tunnelID: randomTunnelID()).path)
        }
        await tunnel.close()
        await pending.close()
    }

    @Test("a port held only by a closed connection in TIME-WAIT: .bindFailed says nothing listens there and why, on both accept paths", arguments: [1, 2])
    func portInTimeWait(shards: Int) async throws {
        let port = try #require(LoopbackSocket.portInTimeWait())
        let relay = TunnelRelay(configuration: configuration(shards: shards), port: port)
        let error = await expectRuntimeError(.bindFailed) { try await relay.start() }
        let reason = error?.reason ?? ""
        #expect(reason.hasPrefix("relay could not bind 127.0.0.1:\(port): address already in use (nothing is listening there: "), "\(reason)")
        #expect(reason.contains("TCP TIME-WAIT") && reason.contains("Wait a minute, or pick a port outside"), "\(reason)")
    }

    @Test("binding a port in use is .bindFailed with the system's reason")
    func portInUse() async throws {
        try await withRelay(configuration(shards: 1)) { _, endpoint in
            let second = TunnelRelay(configuration: configuration(shards: 1), port: endpoint.port)
            let error = await expectRuntimeError(.bindFailed) { try await second.start() }
            #expect(error?.reason == "relay could not bind 127.0.0.1:\(endpoint.port): address already in use")
            // A failed start leaves it startable: not stuck in `starting`.
            await expectRuntimeError(.bindFailed) { try await second.start() }
        }
    }
}
