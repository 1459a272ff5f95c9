import CTAP2
import Foundation
import HybridCore
import NIOHTTP1

/// The bytes the hostile soak writes (requests, client frames) and reads back (the HTTP status,
/// the routing ID, the relay's close frame), written out by hand: a real client cannot send most of
/// them. RFC 6455 §5.2 framing.
enum HostileWire {
    /// A complete WebSocket upgrade request for `path`, offering `fido.cable`, with `extra` header lines.
    static func upgradeRequest(path: String, extra: [String] = []) -> [UInt8] {
        Array(WebSocketUpgradeRequest.text(path: path, extra: extra).utf8)
    }

    /// `/cable/new/{random tunnel ID}`.
    static func randomNewPath() -> String {
        TunnelServicePath.new(tunnelID: randomBytes(HybridConstants.tunnelIDSize)).path
    }

    /// `/cable/connect/{random routing ID}/{random tunnel ID}`: a tunnel that does not exist.
    static func randomConnectPath() -> String {
        TunnelServicePath.connect(
            routingID: randomBytes(HybridConstants.routingIDSize), tunnelID: randomBytes(HybridConstants.tunnelIDSize)
        ).path
    }

    static func randomBytes(_ count: Int) -> [UInt8] {
        RandomSource.system.bytes(count)
    }

    /// WebSocket opcodes used here.
    enum Opcode: UInt8 {
        case continuation = 0x0, text = 0x1, binary = 0x2, close = 0x8, ping = 0x9, pong = 0xA
    }

    /// A client frame: masked with a random key unless `masked` is false; `declaredLength`
    /// overrides the length field (a frame that announces more than it carries).
    static func frame(
        _ opcode: Opcode, _ payload: [UInt8], fin: Bool = true, masked: Bool = true, declaredLength: Int? = nil
    ) -> [UInt8] {
        frame(opcode: opcode.rawValue, payload, fin: fin, key: masked ? randomBytes(4) : nil, declaredLength: declaredLength)
    }

    /// A client frame with any opcode (reserved ones included), masked with `key` (`nil`: unmasked).
    static func frame(
        opcode: UInt8, _ payload: [UInt8], fin: Bool = true, key: [UInt8]?, declaredLength: Int? = nil
    ) -> [UInt8] {
        let length = declaredLength ?? payload.count
        var out: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        let maskBit: UInt8 = key == nil ? 0 : 0x80
        if length < 126 {
            out.append(maskBit | UInt8(length))
        } else if length <= 0xFFFF {
            out.append(maskBit | 126)
            out += [UInt8(length >> 8), UInt8(length & 0xFF)]
        } else {
            out.append(maskBit | 127)
            out += (0..<8).reversed().map { UInt8((UInt64(length) >> (8 * UInt64($0))) & 0xFF) }
        }
        guard let key else { return out + payload }
        out += key
        out += payload.enumerated().map { $0.element ^ key[$0.offset & 3] }
        return out
    }

    /// Where the response head ends (the index after its blank line), if it arrived.
    static func headEnd(_ bytes: [UInt8]) -> Int? {
        ResponseHead.end(bytes)?.1
    }

    /// A complete response head at the start of `bytes`, read by ``ResponseHead``.
    private static func head(_ bytes: [UInt8]) -> HTTPResponseHead? {
        guard let (length, _) = ResponseHead.end(bytes) else { return nil }
        return ResponseHead.parse(Array(bytes[..<length]))
    }

    /// The status of a complete response head ("HTTP/1.1 429 …" → 429).
    static func status(_ bytes: [UInt8]) -> Int? {
        head(bytes).map { Int($0.status.code) }
    }

    /// The status code and reason phrase of a complete response head.
    static func statusLine(_ bytes: [UInt8]) -> (code: Int, reason: String)? {
        head(bytes).map { (Int($0.status.code), $0.status.reasonPhrase) }
    }

    /// The `X-caBLE-Routing-ID` of a 101 response.
    static func routingID(_ bytes: [UInt8]) -> [UInt8]? {
        guard let value = responseHeaders(bytes)[HybridConstants.routingIDHeader.lowercased()] else { return nil }
        return Hex.decode(value, byteCount: HybridConstants.routingIDSize)
    }

    /// The header fields of a complete response head, names in lower case (the last of repeated
    /// names wins); empty while the head is incomplete.
    static func responseHeaders(_ bytes: [UInt8]) -> [String: String] {
        var fields: [String: String] = [:]
        for (name, value) in head(bytes)?.headers ?? [:] { fields[name.lowercased()] = value }
        return fields
    }

    /// The server frames after the response head: (opcode, payload) pairs, complete ones only.
    static func serverFrames(_ bytes: [UInt8]) -> [(opcode: UInt8, payload: ArraySlice<UInt8>)] {
        guard let start = headEnd(bytes) else { return [] }
        return frames(in: bytes, from: start)
    }

    /// The unmasked frames in `bytes` from `index` on: (opcode, payload) pairs, complete ones only.
    static func frames(in bytes: [UInt8], from index: Int) -> [(opcode: UInt8, payload: ArraySlice<UInt8>)] {
        var index = index
        var frames: [(UInt8, ArraySlice<UInt8>)] = []
        while index + 2 <= bytes.count {
            let opcode = bytes[index] & 0x0F
            var length = Int(bytes[index + 1] & 0x7F)
            var start = index + 2
            if length == 126 {
                guard start + 2 <= bytes.count else { break }
                length = Int(bytes[start]) << 8 | Int(bytes[start + 1])
                start += 2
            } else if length == 127 {
                guard start + 8 <= bytes.count else { break }
                length = bytes[start..<start + 8].reduce(0) { $0 << 8 | Int($1) }
                start += 8
            }
            guard length >= 0, start + length <= bytes.count else { break }
            frames.append((opcode, bytes[start..<start + length]))
            index = start + length
        }
        return frames
    }

    /// The code of the relay's close frame, if one arrived (0 for an empty close body).
    static func closeCode(_ bytes: [UInt8]) -> Int? {
        guard let close = serverFrames(bytes).first(where: { $0.opcode == Opcode.close.rawValue }) else { return nil }
        let payload = Array(close.payload)
        return payload.count >= 2 ? Int(payload[0]) << 8 | Int(payload[1]) : 0
    }

    /// Pongs among the server frames.
    static func pongCount(_ bytes: [UInt8]) -> Int {
        serverFrames(bytes).count { $0.opcode == Opcode.pong.rawValue }
    }
}
