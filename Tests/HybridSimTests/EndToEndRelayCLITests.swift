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
        let (relay, relayURL) = try await lab.startRelay(["--allow-origin", "https://CI.example.org:443/", "--allow-origin", "null"])
        defer { relay.terminate() }
        func open(origin: String) async throws -> WebSocketTunnel {
            var options = WebSocketTunnel.Options()
            options.origin = origin
            return try await WebSocketTunnel.open(
                url: relayURL + TunnelServicePath.new(tunnelID: RandomSource.system.bytes(16)).path, timeout: .seconds(5), options: options)
        }
        let tunnel = try await open(origin: "https://ci.example.org")
        await tunnel.close()
        // `null` (a file:// page, a sandboxed frame) is taken as it is.
        let fromFile = try await open(origin: "null")
        await fromFile.close()
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
        #expect(relay.standardError.lines.last == "error: received SIGINT during the shutdown, while 1 connection(s) close: stopped at once, their peers see the connection drop",
                "\(relay.transcript)")
    }

    @Test("a relay left running on the default port: the desktop moves its own, the phone run without --relay opens its tunnel on the old one, and the desktop's 404 says so and what to give the phone")
    func strayRelayOnTheDefaultPort() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        // The stray relay holds 47001. When it cannot (another program has the port), the premise
        // is not this test's to set up: nothing is checked.
        guard let stray = try? await lab.startRelay(["--port", "47001"]) else { return }
        defer { stray.0.terminate() }
        let desktop = try lab.start("desktop", ["desktop", "--request", "mc", "--proximity-port", "0", "--timeout", "10"])
        let errors = try await desktop.waitForOutput("phone command line", in: \.standardError) { lines in
            lines.contains { $0.hasPrefix("phone command:") }
        }
        let output = try await desktop.waitForOutput("FIDO:/ line") { $0.contains { $0.hasPrefix("FIDO:/") } }
        let command = try #require(errors.first { $0.hasPrefix("phone command:") })
        let proximity = try #require(EndToEndLab.word(after: "--proximity ", in: command))
        let ownRelay = try #require(EndToEndLab.word(after: "--relay ", in: command))
        try #require(ownRelay != "ws://127.0.0.1:47001", "the desktop moved off the taken port: \(desktop.transcript)")
        // As the README's two-terminal steps run it: no --relay, so the default, the stray one.
        let phone = try lab.start("phone", ["phone", "--qr", try #require(output.first { $0.hasPrefix("FIDO:/") }), "--proximity", proximity, "--timeout", "5"])
        defer { phone.terminate() }
        #expect(try await desktop.waitForExit(timeout: .seconds(20)) == 6, "\(desktop.transcript)")
        #expect(FailureOutput.singleErrorLine(desktop).hasSuffix(
            "; the phone opened its tunnel on another relay (one still running on ws://127.0.0.1:47001?): give it --relay \(ownRelay)"),
                "\(desktop.transcript)")
    }
}
