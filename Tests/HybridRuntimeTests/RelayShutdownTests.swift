import HybridCore
import HybridRuntime
import Testing

@Suite("Relay lifecycle and graceful shutdown")
struct RelayShutdownTests {
    @Test("shutdown closes every tunnel with 1001, drops pending requests and stops accepting")
    func gracefulShutdown() async throws {
        let relay = TunnelRelay()
        let endpoint = try await relay.start()
        #expect(relay.endpoint == endpoint)
        #expect(endpoint.url == "ws://127.0.0.1:\(endpoint.port)")
        let full = try await openTunnel(endpoint)
        let half = try await WebSocketTunnel.open(
            url: endpoint.url + TunnelServicePath.new(tunnelID: randomTunnelID()).path
        )
        let pending = try await RawConnection.connect(port: endpoint.port)
        try await pending.write("GET /cable/new/")
        #expect(await eventually { relay.statistics.openConnections == 4 })
        #expect(relay.openTunnelCount == 2)

        let start = ContinuousClock.now
        await relay.shutdown()
        #expect(ContinuousClock.now - start < .seconds(5))

        for end in [full.phone, full.desktop, half] {
            let error = await expectRuntimeError(.closed) { _ = try await end.receive(timeout: .seconds(2)) }
            #expect(error?.closeCode == .goingAway)
            #expect(error?.reason.contains("relay shutting down") == true)
        }
        #expect(await pending.waitForClose())
        #expect(relay.openTunnelCount == 0)
        #expect(relay.statistics.openConnections == 0)
        #expect(relay.endpoint == nil)
        await expectRuntimeError(.connectionFailed) {
            _ = try await WebSocketTunnel.open(
                url: endpoint.url + TunnelServicePath.new(tunnelID: randomTunnelID()).path
            )
        }
        await full.close()
        await half.close()
        await relay.shutdown()  // idempotent
    }

    @Test("shutdown does not wait forever for a peer that ignores the close frame")
    func unresponsivePeer() async throws {
        var configuration = RelayConfiguration()
        configuration.closeHandshakeTimeout = .milliseconds(200)
        let relay = TunnelRelay(configuration: configuration)
        let endpoint = try await relay.start()
        let raw = try await RawConnection.connect(port: endpoint.port)
        try await raw.write(RawConnection.upgradeRequest(path: TunnelServicePath.new(tunnelID: randomTunnelID()).path))
        #expect(RawConnection.status(of: await raw.readResponseHead()) == 101)
        let start = ContinuousClock.now
        await relay.shutdown()  // the raw peer never answers the close frame
        #expect(ContinuousClock.now - start < .seconds(3))
        #expect(await raw.waitForClose())
        // It did get a close frame with 1001 first.
        let frames = RawConnection.serverFrames(in: Array(raw.received.drop { $0 != 0x88 }))
        #expect(frames.first?.opcode == 0x8)
        #expect(frames.first.map { Array($0.payload.prefix(2)) } == [0x03, 0xE9])
        #expect(relay.statistics.openConnections == 0)
    }

    @Test("start twice, shutdown before start, non-loopback host")
    func lifecycleErrors() async throws {
        let unused = TunnelRelay()
        await unused.shutdown()
        await expectRuntimeError(.invalidState) { try await unused.start() }

        let relay = TunnelRelay()
        try await relay.start()
        await expectRuntimeError(.invalidState) { try await relay.start() }
        await relay.shutdown()

        await expectRuntimeError(.invalidAddress) { try await TunnelRelay(host: "0.0.0.0").start() }
    }

    @Test("binding a port in use is .bindFailed")
    func portInUse() async throws {
        try await withRelay { _, endpoint in
            let second = TunnelRelay(port: endpoint.port)
            await expectRuntimeError(.bindFailed) { try await second.start() }
        }
    }
}
