import Crypto
import Foundation

/// RFC 6455 §4.2.2: the `Sec-WebSocket-Accept` value that proves a server read the client's
/// `Sec-WebSocket-Key`: base64 of SHA-1 over the key and a fixed GUID (§1.3).
enum WebSocketAccept {
    /// The GUID appended to the key (RFC 6455 §1.3).
    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// The `Sec-WebSocket-Accept` value for `key`.
    static func value(forKey key: String) -> String {
        Data(Insecure.SHA1.hash(data: Data((key + guid).utf8))).base64EncodedString()
    }
}

/// The text of an HTTP/1.1 WebSocket upgrade request (RFC 6455 §4.1) as hand-written clients send it:
/// the load generator, the hostile soak, the fuzz targets' seeds and the tests' raw connections.
package enum WebSocketUpgradeRequest {
    /// The sample key of RFC 6455 §1.3 (its `Sec-WebSocket-Accept` is `s3pPLMBiTxaQ9kYGzzhZRbK+xOo=`).
    package static let sampleKey = "dGhlIHNhbXBsZSBub25jZQ=="

    /// The request for `path`, ending with the blank line. `upgrade: false` leaves out the four
    /// upgrade headers (a plain request); `subprotocol: nil` leaves out `Sec-WebSocket-Protocol`;
    /// `extra` header lines go last.
    package static func text(
        path: String, host: String = "127.0.0.1", method: String = "GET", key: String = sampleKey,
        upgrade: Bool = true, subprotocol: String? = "fido.cable", extra: [String] = []
    ) -> String {
        var lines = ["\(method) \(path) HTTP/1.1", "Host: \(host)"]
        if upgrade {
            lines += ["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Key: \(key)", "Sec-WebSocket-Version: 13"]
        }
        if let subprotocol { lines.append("Sec-WebSocket-Protocol: \(subprotocol)") }
        return (lines + extra).joined(separator: "\r\n") + "\r\n\r\n"
    }
}
