import HybridCore
@testable import HybridRuntime
import Testing

/// The WebSocket client transport on its own: URL parsing, failures surfaced as typed errors,
/// timeouts, and the checks it makes on the relay's 101.
@Suite("WebSocket client transport")
struct WebSocketTunnelTests {
    /// The fake server never answers a close frame: do not wait the default 2 s for it.
    static var fakeServerOptions: WebSocketTunnel.Options {
        var options = WebSocketTunnel.Options()
        options.closeTimeout = .milliseconds(100)
        return options
    }

    @Test(
        "malformed or unsupported URLs are rejected before connecting",
        arguments: [
            "wss://127.0.0.1:1234/cable/new/00",
            "http://127.0.0.1/cable/new/00",
            "ws://:1234/cable/new/00",
            "ws://127.0.0.1:0/x",
            "ws://127.0.0.1:99999/x",
            "ws://127.0.0.1:12ab/x",
            "ws://[::1/x",
        ]
    )
    func invalidURLs(url: String) async {
        await expectRuntimeError(.invalidAddress) { _ = try await WebSocketTunnel.open(url: url, timeout: .seconds(1)) }
    }

    @Test("a refused TCP connection is .connectionFailed")
    func connectionRefused() async throws {
        // Bind a relay, note its port, stop it: nothing listens there any more.
        let relay = TunnelRelay()
        let port = try await relay.start().port
        await relay.shutdown()
        // By address, and by name (through NIO's resolver, whose error nests the address's): the
        // system's reason either way, not NIO's error text.
        for host in ["127.0.0.1", "localhost"] {
            let error = await expectRuntimeError(.connectionFailed) {
                _ = try await WebSocketTunnel.open(url: "ws://\(host):\(port)/cable/new/00", timeout: .seconds(2))
            }
            #expect(error?.description == "could not connect to the relay at \(host):\(port): connection refused")
        }
    }

    @Test("a server that never answers the upgrade is a .timeout within the budget")
    func upgradeTimeout() async throws {
        let server = try await FakeTunnelServer.start(.silent)
        let start = ContinuousClock.now
        await expectRuntimeError(.timeout) {
            _ = try await WebSocketTunnel.open(
                url: "ws://127.0.0.1:\(server.port)" + TunnelServicePath.new(tunnelID: randomTunnelID()).path,
                timeout: .milliseconds(300)
            )
        }
        #expect(ContinuousClock.now - start < .seconds(2))
        await server.stop()
    }

    @Test("a 101 without the fido.cable subprotocol is .handshakeFailed")
    func missingSelectedSubprotocol() async throws {
        let server = try await FakeTunnelServer.start(.upgrade(headers: [("X-caBLE-Routing-ID", "2A0000")], frame: nil))
        let error = await expectRuntimeError(.handshakeFailed) {
            _ = try await WebSocketTunnel.open(
                url: "ws://127.0.0.1:\(server.port)/cable/new/" + upperHex(randomTunnelID()),
                options: Self.fakeServerOptions
            )
        }
        #expect(error?.description.contains("fido.cable") == true)
        await server.stop()
    }

    @Test(
        "malformed or duplicated X-caBLE-Routing-ID headers are .handshakeFailed",
        arguments: [
            [("X-caBLE-Routing-ID", "2A00")],
            [("X-caBLE-Routing-ID", "2A00ZZ")],
            [("X-caBLE-Routing-ID", "2A0000"), ("X-caBLE-Routing-ID", "2A0000")],
        ]
    )
    func badRoutingHeader(routing: [(String, String)]) async throws {
        let server = try await FakeTunnelServer.start(
            .upgrade(headers: [("Sec-WebSocket-Protocol", "fido.cable")] + routing, frame: nil)
        )
        await expectRuntimeError(.handshakeFailed) {
            _ = try await WebSocketTunnel.open(
                url: "ws://127.0.0.1:\(server.port)/cable/new/" + upperHex(randomTunnelID()),
                options: Self.fakeServerOptions
            )
        }
        await server.stop()
    }

    @Test("the routing ID header is read case-insensitively (Chromium's fake server sends 2A0000)")
    func routingHeaderCase() async throws {
        let server = try await FakeTunnelServer.start(
            .upgrade(headers: [("sec-websocket-protocol", "fido.cable"), ("x-cable-routing-id", "2a00ff")], frame: nil)
        )
        let tunnel = try await WebSocketTunnel.open(
            url: "ws://127.0.0.1:\(server.port)/cable/new/" + upperHex(randomTunnelID()),
            options: Self.fakeServerOptions
        )
        #expect(tunnel.routingID == [0x2A, 0x00, 0xFF])
        await tunnel.close()
        await server.stop()
    }

    @Test("a text frame from the relay is a .protocolViolation")
    func textFrameFromRelay() async throws {
        let server = try await FakeTunnelServer.start(
            .upgrade(headers: [("Sec-WebSocket-Protocol", "fido.cable")], frame: (.text, Array("hi".utf8)))
        )
        let tunnel = try await WebSocketTunnel.open(
            url: "ws://127.0.0.1:\(server.port)/cable/connect/000000/" + upperHex(randomTunnelID()),
            options: Self.fakeServerOptions
        )
        #expect(tunnel.routingID == nil)
        let error = await expectRuntimeError(.protocolViolation) { _ = try await tunnel.receive(timeout: .seconds(2)) }
        #expect(error?.closeCode == .unsupportedData)
        await tunnel.close()
        await server.stop()
    }

    @Test("receive times out with .timeout and the tunnel keeps working")
    func receiveTimeout() async throws {
        try await withRelay { _, endpoint in
            let ends = try await openTunnel(endpoint)
            let start = ContinuousClock.now
            let error = await expectRuntimeError(.timeout) {
                _ = try await ends.desktop.receive(timeout: .milliseconds(100))
            }
            #expect(ContinuousClock.now - start >= .milliseconds(100))
            #expect(error?.description.contains("timed out after 100 ms") == true)
            try await ends.phone.send([42])
            #expect(try await ends.desktop.receive(timeout: .seconds(2)) == [42])
            await ends.close()
        }
    }

    @Test("two concurrent receives: the second is .invalidState")
    func concurrentReceive() async throws {
        try await withRelay { _, endpoint in
            let ends = try await openTunnel(endpoint)
            let desktop = ends.desktop
            let first = Task { try await desktop.receive(timeout: .seconds(2)) }
            await desktop.receiveIsWaiting()
            await expectRuntimeError(.invalidState) { _ = try await desktop.receive(timeout: .seconds(1)) }
            try await ends.phone.send([7])
            #expect(try await first.value == [7])
            await ends.close()
        }
    }

    @Test("a cancelled receive throws CancellationError")
    func cancelledReceive() async throws {
        try await withRelay { _, endpoint in
            let ends = try await openTunnel(endpoint)
            let desktop = ends.desktop
            let task = Task { try await desktop.receive(timeout: .seconds(5)) }
            await desktop.receiveIsWaiting()
            task.cancel()
            await #expect(throws: CancellationError.self) { _ = try await task.value }
            await ends.close()
        }
    }

    @Test("close is idempotent; send and receive after close throw .closed")
    func closeTwice() async throws {
        try await withRelay { relay, endpoint in
            let ends = try await openTunnel(endpoint)
            await ends.phone.close()
            await ends.phone.close()
            await expectRuntimeError(.closed) { try await ends.phone.send([1]) }
            await expectRuntimeError(.closed) { _ = try await ends.phone.receive(timeout: .seconds(1)) }
            await ends.desktop.close(code: .goingAway)
            #expect(await eventually { relay.statistics.openConnections == 0 })
        }
    }

    @Test("a tunnel dropped without close() releases its connection")
    func droppedTunnelCloses() async throws {
        try await withRelay { relay, endpoint in
            do {
                _ = try await WebSocketTunnel.open(
                    url: endpoint.url + TunnelServicePath.new(tunnelID: randomTunnelID()).path
                )
            }
            #expect(await eventually { relay.statistics.openConnections == 0 && relay.openTunnelCount == 0 })
        }
    }

    /// `receiveIfReady()` hands over a message that already arrived, without waiting, in order, and
    /// `nil` when none is there; `receive` still gets what follows.
    @Test("receiveIfReady returns what already arrived, in order, and nil otherwise")
    func receiveIfReady() async throws {
        try await withRelay { _, endpoint in
            let ends = try await openTunnel(endpoint)
            #expect(ends.phone.receiveIfReady() == nil)
            try await ends.desktop.send([1])
            try await ends.desktop.send([2, 2])
            var taken: [[UInt8]] = []
            #expect(await eventually {
                if let message = ends.phone.receiveIfReady() { taken.append(message) }
                return taken.count == 2
            })
            #expect(taken == [[1], [2, 2]])
            #expect(ends.phone.receiveIfReady() == nil)
            try await ends.desktop.send([3])
            #expect(try await ends.phone.receive(timeout: .seconds(2)) == [3])
            await ends.phone.close()
            await ends.desktop.close()
        }
    }
}
