import NIOHTTP1
import Testing

@testable import HybridRuntime

/// The relay's header reading without lists (`HTTPHeaders.forEachToken` and its two uses) against
/// NIO's `headers[canonicalForm:]`, which it replaces on the request path.
@Suite("Header tokens agree with NIO's canonical form")
struct HeaderTokensTests {
    static let headerSets: [[(String, String)]] = [
        [("Upgrade", "websocket")],
        [("upgrade", "WebSocket")],
        [("UPGRADE", "h2c, websocket")],
        [("Upgrade", "h2c"), ("Upgrade", " websocket ")],
        [("Upgrade", "websockets")],
        [("Upgrade", "web socket")],
        [("Upgrade", ",,websocket,")],
        [("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")],
        [("Sec-WebSocket-Key", "a"), ("sec-websocket-key", "b")],
        [("Sec-WebSocket-Key", "a, b")],
        [("Sec-WebSocket-Version", "13")],
        [("Sec-WebSocket-Version", "13, 8")],
        [("Sec-WebSocket-Protocol", "fido.cable")],
        [("Sec-WebSocket-Protocol", "chat, fido.cable")],
        [("Sec-WebSocket-Protocol", "FIDO.cable")],
        [("Sec-WebSocket-Protocol", "fido.cable2")],
        [("X-Upgrade", "websocket")],
        [("Sec-WebSocket-Key", "abc, ")],
        [("Sec-WebSocket-Version", " , 13")],
        [("Sec-WebSocket-Key", "")],
        [("Sec-WebSocket-Key", "   ")],
        [("Upgrade", "a,,websocket")],
        [],
    ]

    @Test("the same elements, in order, for every header set", arguments: 0..<headerSets.count)
    func sameElements(index: Int) {
        let headers = HTTPHeaders(Self.headerSets[index])
        for name in ["upgrade", "sec-websocket-key", "sec-websocket-version", "sec-websocket-protocol"] {
            var ours: [String] = []
            headers.forEachToken(named: name) { ours.append(String($0)); return true }
            let nios = headers[canonicalForm: name].map(String.init)
            #expect(ours == nios, "\(Self.headerSets[index]) \(name)")
        }
    }

    @Test("known answers for the relay's questions")
    func knownAnswers() {
        #expect(HTTPHeaders([("UPGRADE", "h2c, WebSocket")]).containsToken(named: "upgrade", "websocket", anyCase: true))
        #expect(!HTTPHeaders([("Upgrade", "websockets")]).containsToken(named: "upgrade", "websocket", anyCase: true))
        #expect(!HTTPHeaders([("Sec-WebSocket-Protocol", "FIDO.cable")]).containsToken(named: "sec-websocket-protocol", "fido.cable"))
        #expect(HTTPHeaders([("Sec-WebSocket-Protocol", "chat,fido.cable")]).containsToken(named: "sec-websocket-protocol", "fido.cable"))
        #expect(HTTPHeaders([("Sec-WebSocket-Key", " k ")]).onlyToken(named: "sec-websocket-key") == "k")
        #expect(HTTPHeaders([("Sec-WebSocket-Key", "a, b")]).onlyToken(named: "sec-websocket-key") == nil)
        #expect(HTTPHeaders([("Sec-WebSocket-Key", "a"), ("Sec-WebSocket-Key", "a")]).onlyToken(named: "sec-websocket-key") == nil)
        #expect(HTTPHeaders([("Sec-WebSocket-Key", "")]).onlyToken(named: "sec-websocket-key") == nil)
        // A trailing comma leaves an empty element: two elements, so not a single key (as NIO's check).
        #expect(HTTPHeaders([("Sec-WebSocket-Key", "abc, ")]).onlyToken(named: "sec-websocket-key") == nil)
        #expect(HTTPHeaders([("Sec-WebSocket-Version", "13, ")]).onlyToken(named: "sec-websocket-version") == nil)
    }
}
