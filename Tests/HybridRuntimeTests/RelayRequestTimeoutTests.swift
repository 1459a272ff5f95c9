import HybridCore
@testable import HybridRuntime
import NIOCore
import NIOPosix
import Testing

/// A request the relay's upgrade timeout finds begun and unfinished is answered `408` with the
/// reason, by a shard (one loop: no dispatcher) and by the dispatcher (a request line too short to
/// route); a connection that sent nothing is closed without an answer.
@Suite("Relay: requests not finished within the upgrade timeout")
struct RelayRequestTimeoutTests {
    /// A relay on `loops` event loops with an upgrade timeout of `timeout` (200 ms unless given).
    private func withTimingRelay(
        loops: Int, timeout: Duration = .milliseconds(200), _ body: (TunnelRelay, RelayEndpoint) async throws -> Void
    ) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: loops)
        var configuration = RelayConfiguration()
        configuration.upgradeTimeout = timeout
        do {
            try await withRelay(configuration, group: group, body)
        } catch {
            try await group.shutdownGracefully()
            throw error
        }
        try await group.shutdownGracefully()
    }

    /// Sends `bytes`, then nothing; returns the whole answer (the relay closes the connection).
    private func answer(to bytes: String, endpoint: RelayEndpoint) async throws -> String {
        let raw = try await RawConnection.connect(port: endpoint.port)
        try await raw.write(bytes)
        #expect(await raw.waitForClose(timeout: .seconds(5)), "the relay did not close the connection")
        return String(decoding: raw.received, as: UTF8.self)
    }

    private static let tunnelPath = TunnelServicePath.new(tunnelID: [UInt8](repeating: 0x42, count: 16)).path

    @Test(
        "one loop: a request cut short (request line, mid-headers) is answered 408 and counted, no 400",
        arguments: ["GET /cable/new/", "GET \(tunnelPath) HTTP/1.1\r\nHost: x\r\n"])
    func shardAnswers408(partial: String) async throws {
        try await withTimingRelay(loops: 1) { relay, endpoint in
            let text = try await answer(to: partial, endpoint: endpoint)
            #expect(text.hasPrefix("HTTP/1.1 408 Request Timeout\r\n"), "\(text)")
            #expect(text.hasSuffix("\r\n\r\nrequest not complete within 200 ms\n"), "\(text)")
            #expect(await eventually { relay.statistics.openConnections == 0 })
            #expect(relay.statistics.rejectedRequests == [408: 1], "\(relay.statistics.rejectedRequests)")
        }
    }

    @Test(
        "an upgrade whose head announces content is refused 400 from its head, not read until the 408",
        arguments: [
            ("Content-Length: 5", "announces 5 bytes"), ("Transfer-Encoding: chunked", "announces a Transfer-Encoding"),
        ])
    func announcedBodyRefused(header: String, reason: String) async throws {
        try await withTimingRelay(loops: 1, timeout: .seconds(30)) { relay, endpoint in
            let start = ContinuousClock.now
            let head = WebSocketUpgradeRequest.text(
                path: Self.tunnelPath, method: "GET", upgrade: true, subprotocol: "fido.cable", extra: [header])
            let text = try await answer(to: head, endpoint: endpoint)
            #expect(text.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(text)")
            #expect(text.hasSuffix("\r\n\r\na GET to the tunnel service carries no content; this one \(reason)\n"), "\(text)")
            #expect(ContinuousClock.now - start < .seconds(10), "the relay waited for the content (its upgrade timeout is 30 s)")
            #expect(relay.openTunnelCount == 0)
            #expect(relay.statistics.rejectedRequests == [400: 1], "\(relay.statistics.rejectedRequests)")
        }
    }

    @Test("a GET with Content-Length: 0 is a bare GET: it upgrades")
    func zeroLengthUpgrades() async throws {
        try await withTimingRelay(loops: 1, timeout: .seconds(30)) { relay, endpoint in
            let raw = try await RawConnection.connect(port: endpoint.port)
            try await raw.write(RawConnection.upgradeRequest(path: Self.tunnelPath))
            let head = await raw.readResponseHead()
            #expect(RawConnection.status(of: head) == 101, "\(head)")
        }
    }

    @Test("two loops: a request line too short to route is answered 408 by the dispatcher and counted")
    func dispatcherAnswers408() async throws {
        try await withTimingRelay(loops: 2) { relay, endpoint in
            let text = try await answer(to: "GET /cable/conn", endpoint: endpoint)
            #expect(text.hasPrefix("HTTP/1.1 408 Request Timeout\r\n"), "\(text)")
            #expect(text.hasSuffix("\r\n\r\nrequest not complete within 200 ms\n"), "\(text)")
            #expect(await eventually { relay.statistics.openConnections == 0 })
            // Counted on a shard's loop, after the answer went out.
            #expect(await eventually { relay.statistics.rejectedRequests == [408: 1] }, "\(relay.statistics.rejectedRequests)")
        }
    }

    @Test("a connection that sends nothing is closed at its timeout without an answer", arguments: [1, 2])
    func silentConnection(loops: Int) async throws {
        try await withTimingRelay(loops: loops) { relay, endpoint in
            let raw = try await RawConnection.connect(port: endpoint.port)
            // The kernel hands a silent connection over after TCP_DEFER_ACCEPT's second.
            #expect(await raw.waitForClose(timeout: .seconds(6)), "the relay did not close the silent connection")
            #expect(raw.received.isEmpty, "\(String(decoding: raw.received, as: UTF8.self))")
            #expect(relay.statistics.rejectedRequests.isEmpty, "\(relay.statistics.rejectedRequests)")
        }
    }
}
