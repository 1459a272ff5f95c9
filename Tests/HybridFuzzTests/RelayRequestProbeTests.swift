import HybridRuntime
import Testing

/// The relay fuzz target's harness speaks to the real relay pipeline: known requests get the
/// relay's known answers, and nothing stays open afterwards.
@Suite("Relay request probe")
struct RelayRequestProbeTests {
    static func request(_ path: String, subprotocol: Bool = true) -> [UInt8] {
        Array(WebSocketUpgradeRequest.text(path: path, subprotocol: subprotocol ? "fido.cable" : nil).utf8)
    }

    static func status(_ outcome: RelayRequestProbe.Outcome) -> String {
        String(decoding: outcome.response.prefix(12), as: UTF8.self)
    }

    @Test("a new-tunnel upgrade is answered 101 and the tunnel is gone once the connection closes")
    func upgrade() {
        let outcome = RelayRequestProbe.run(Self.request("/cable/new/" + String(repeating: "0A", count: 16)))
        #expect(Self.status(outcome) == "HTTP/1.1 101")
        #expect(outcome.leftoverConnections == 0 && outcome.leftoverTunnels == 0)
    }

    @Test("an unknown path is 404, a missing subprotocol is refused, garbage gets 400")
    func refusals() {
        #expect(Self.status(RelayRequestProbe.run(Self.request("/nope"))) == "HTTP/1.1 404")
        let noSubprotocol = RelayRequestProbe.run(Self.request("/cable/new/" + String(repeating: "0A", count: 16), subprotocol: false))
        #expect(Self.status(noSubprotocol).hasPrefix("HTTP/1.1 4"))
        let garbage = RelayRequestProbe.run(Array("\u{1}\u{2}\u{3} nonsense\r\n\r\n".utf8))
        #expect(Self.status(garbage) == "HTTP/1.1 400")
        #expect(garbage.leftoverConnections == 0)
    }
}
