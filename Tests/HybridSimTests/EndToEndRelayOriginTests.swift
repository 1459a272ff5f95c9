import Foundation
import HybridCore
import HybridRuntime
import Testing

/// `hybrid-sim relay --allow-origin`: a value is taken as the Origin header a browser sends for it.
@Suite("End to end: relay --allow-origin")
struct EndToEndRelayOriginTests {
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
}
