import Foundation
import HybridCore
import CTAP2
import HybridRuntime
import HybridTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `hybrid-sim relay` as an operator runs it: `--allow-origin` values taken as the Origin header a
/// browser sends for them; a second Ctrl-C while the tunnels close.
@Suite("End to end: relay command")
struct EndToEndRelayCLITests {
    @Test("an --allow-origin with a trailing slash and the default port lets in the Origin a browser sends (https://ci.example.org); another origin gets 403")
    func serializedOrigin() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (relay, relayURL) = try await lab.startRelay(["--allow-origin", "https://CI.example.org:443/"])
        defer { relay.terminate() }
        func open(origin: String) async throws -> WebSocketTunnel {
            var options = WebSocketTunnel.Options()
            options.origin = origin
            return try await WebSocketTunnel.open(
                url: relayURL + TunnelServicePath.new(tunnelID: RandomSource.system.bytes(16)).path, timeout: .seconds(5), options: options)
        }
        let tunnel = try await open(origin: "https://ci.example.org")
        await tunnel.close()
        let error = await #expect(throws: RuntimeError.self) { _ = try await open(origin: "https://other.example") }
        #expect(error?.httpStatus == 403, "\(String(describing: error))")
    }

    @Test("a second SIGINT while the relay waits for a close frame that never comes: it stops at once, exit 130, saying so")
    func secondSignalStopsAtOnce() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (relay, relayURL) = try await lab.startRelay(["--close-timeout", "30"])
        defer { relay.terminate() }
        let port = try #require(Int(relayURL.split(separator: ":").last ?? ""))
        // A creator that is upgraded and then reads nothing: the relay's close frame is never answered.
        let peer = try #require(LoopbackSocket.connect(port: port))
        defer { close(peer) }
        let tunnelID = Hex.encode(RandomSource.system.bytes(16))
        #expect(LoopbackSocket.send(peer, """
            GET /cable/new/\(tunnelID) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
            Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: fido.cable\r\n\r\n
            """))
        try #require(LoopbackSocket.receive(peer, until: "\r\n\r\n").hasPrefix("HTTP/1.1 101"))
        relay.signal(SIGINT)
        try await Task.sleep(for: .milliseconds(500))
        #expect(relay.isRunning, "the first SIGINT waits for the close: \(relay.transcript)")
        let start = ContinuousClock.now
        relay.signal(SIGINT)
        #expect(try await relay.waitForExit(timeout: .seconds(10)) == 130, "\(relay.transcript)")
        #expect(ContinuousClock.now - start < .seconds(5))
        #expect(relay.standardError.lines.last == "error: received SIGINT again while 1 connection(s) close: stopped at once, their peers see the connection drop",
                "\(relay.transcript)")
    }
}
