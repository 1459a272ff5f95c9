import HybridCore
@testable import HybridRuntime
import NIOPosix
import Testing

/// The relay's listening socket hands a connection over only once its first bytes arrived
/// (`TCP_DEFER_ACCEPT`, Linux): one wake-up and one look per connection instead of an accept, a wait
/// and a second look, and a connection that sends nothing holds no descriptor and no cap until the
/// kernel hands it over anyway (``RelayLoopAcceptor/deferAcceptSeconds``), after which the upgrade
/// timeout still closes it.
@Suite("Relay deferred accept")
struct RelayDeferredAcceptTests {
    /// A relay with two shards, so connections go through the dispatcher thread.
    static func twoShards(upgradeTimeout: Duration = .seconds(10)) -> RelayConfiguration {
        var configuration = RelayConfiguration()
        configuration.eventLoops = 2
        configuration.upgradeTimeout = upgradeTimeout
        return configuration
    }

    #if os(Linux)
    @Test("clients that connect, wait, then send their request: the dispatcher looks at each one once")
    func oneLookPerConnection() async throws {
        try await withRelay(Self.twoShards(), group: twoLoopGroup) { relay, endpoint in
            let before = relay.dispatcherPeekCount
            let connections = 5
            for _ in 0..<connections {
                let raw = try await RawConnection.connect(port: endpoint.port)
                // Accepted at the handshake, the dispatcher would find nothing to peek at now and
                // look again when the request arrives: two looks.
                try await Task.sleep(for: .milliseconds(50))
                try await raw.write(RawConnection.upgradeRequest(path: TunnelServicePath.new(tunnelID: randomTunnelID()).path))
                #expect(RawConnection.status(of: await raw.readResponseHead()) == 101)
                await raw.close()
            }
            #expect(relay.dispatcherPeekCount - before == connections)
            #expect(await eventually { relay.statistics.openConnections == 0 })
        }
    }

    @Test(
        "a connection that sends nothing is not the relay's until the kernel hands it over; then the upgrade timeout closes it",
        arguments: [1, 2]
    )
    func silentConnection(shards: Int) async throws {
        var configuration = Self.twoShards(upgradeTimeout: .milliseconds(500))
        configuration.eventLoops = shards
        let group: MultiThreadedEventLoopGroup = shards == 2 ? twoLoopGroup : .singleton
        try await withRelay(configuration, group: group) { relay, endpoint in
            // The first check means something only if it ran well before the kernel's hand-over
            // (about 1 s after the connect): a machine too slow for that gets another try.
            var checked = false
            for _ in 0..<3 where !checked {
                let started = ContinuousClock.now
                let raw = try await RawConnection.connect(port: endpoint.port)
                try await Task.sleep(for: .milliseconds(300))
                let open = relay.statistics.openConnections
                if ContinuousClock.now - started < .milliseconds(800) {
                    // Without the deferred accept the relay holds it by now (a descriptor, a pending upgrade).
                    #expect(open == 0, "the relay holds a silent connection 300 ms after its connect")
                    checked = true
                }
                #expect(await raw.waitForClose(timeout: .seconds(6)), "closed: handed over, then the upgrade timeout")
                let elapsed = ContinuousClock.now - started
                // The 0.5 s upgrade timeout runs from the hand-over, about 1 s in (from the connect: 0.5 s).
                #expect(elapsed >= .milliseconds(1300), "closed \(elapsed) after its connect")
                #expect(await eventually { relay.statistics.openConnections == 0 })
            }
            #expect(checked, "three times too slow to look before the kernel's hand-over")
        }
    }
    #endif
}
