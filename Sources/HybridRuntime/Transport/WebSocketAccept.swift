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
