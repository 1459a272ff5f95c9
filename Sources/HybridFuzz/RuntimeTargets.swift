import HybridRuntime

/// The relay's request handling and the proximity stub's datagram.
enum RuntimeTargets {
    static let all = [relayRequest, relayRoute, proximityDatagram, clientUpgrade]

    /// A relay's answer to the client's upgrade request (``ClientUpgradeProbe``).
    static let clientUpgrade = FuzzTarget(
        "client-upgrade",
        "the client's WebSocket upgrade: a relay's response head, the 101's checks and refusal bodies (EmbeddedChannel); always resolved once the connection ends, a 101 accepted only with the right Sec-WebSocket-Accept",
        seeds: {
            [
                Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: fido.cable\r\nX-caBLE-Routing-ID: 0A0B0C\r\n\r\n".utf8),
                Array("HTTP/1.1 404 Not Found\r\nContent-Length: 16\r\n\r\nno such endpoint".utf8),
                Array("HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nfull\r\n0\r\n\r\n".utf8),
                Array("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 410 Gone\r\n\r\ngone".utf8),
            ]
        }
    ) { input in
        switch ClientUpgradeProbe.run(input) {
        case .unresolved:
            return .violation("the client still waited after the connection ended: \(input.fuzzHex)")
        case .upgraded:
            let text = String(decoding: input, as: UTF8.self)
            return FuzzTarget.check(
                text.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "upgraded without the right Sec-WebSocket-Accept: \(input.fuzzHex)")
        case .rejected:
            return .rejected
        case .failed:
            return .rejected
        }
    }

    /// A valid upgrade request for `path`, as a tunnel client sends it.
    static func upgradeRequest(_ path: String, extra: [String] = []) -> [UInt8] {
        Array(WebSocketUpgradeRequest.text(path: path, extra: extra).utf8)
    }

    static let tunnelID = String(repeating: "0A", count: 16)

    /// One connection's bytes through the relay's real pipeline (``RelayRequestProbe``).
    static let relayRequest = FuzzTarget(
        "relay-request",
        "the relay's HTTP request parsing, path and header checks and WebSocket frames (EmbeddedChannel); every answer is an HTTP status line and nothing is left open",
        seeds: {
            [
                upgradeRequest("/cable/new/\(tunnelID)"),
                upgradeRequest("/cable/connect/000000/\(tunnelID)", extra: ["Origin: wss://cable.example"]),
                upgradeRequest("/cable/contact/AAAA", extra: ["X-caBLE-Client-Payload: 00"]),
                upgradeRequest("/cable/new/\(tunnelID)") + [0x82, 0x83, 1, 2, 3, 4, 0xAA, 0xBB, 0xCC, 0x88, 0x80, 0, 0, 0, 0],
                Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8),
            ]
        }
    ) { input in
        let outcome = RelayRequestProbe.run(input)
        if outcome.leftoverConnections != 0 || outcome.leftoverTunnels != 0 {
            return .violation(
                "\(outcome.leftoverConnections) connections and \(outcome.leftoverTunnels) tunnels left open after \(input.fuzzHex)")
        }
        guard !outcome.response.isEmpty else { return .rejected }
        let head = String(decoding: outcome.response.prefix(13), as: UTF8.self)
        guard head.hasPrefix("HTTP/1.1 "), let status = Int(head.dropFirst(9).prefix(3)) else {
            return .violation("the relay answered \(Array(outcome.response.prefix(64)).fuzzHex) to \(input.fuzzHex)")
        }
        return status == 101 ? .accepted : .rejected
    }

    /// The relay dispatcher's request-line router (`RelayDispatcher.route`): the first input byte
    /// picks the shard count (1…8), the rest is the start of a connection's request as it is peeked.
    static let relayRoute = FuzzTarget(
        "relay-route",
        "RelayDispatcher.route (which shard a connection goes to, from its first bytes); a shard index is in range, and once a prefix decides, every longer prefix decides the same",
        seeds: {
            [
                [2] + Array("GET /cable/new/\(tunnelID) HTTP/1.1".utf8),
                [4] + Array("GET /cable/connect/0A0B0C/\(tunnelID) HTTP/1.1".utf8),
                [2] + Array("GET /cable/contact/AAAA HTTP/1.1".utf8),
                [3] + Array("GET /cable/listen/AAAA HTTP/1.1".utf8),
                [2] + Array("GET /cable/ne".utf8),
                [1] + Array("POST / HTTP/1.1".utf8),
            ]
        }
    ) { input in
        guard let first = input.first else { return .rejected }
        let shardCount = Int(first % 8) + 1
        let request = Array(input.dropFirst().prefix(RelayDispatcher.peekLength))
        let full = RelayDispatcher.route(request[...], shardCount: shardCount)
        if case .shard(let index) = full, !(0..<shardCount).contains(index) {
            return .violation("shard \(index) of \(shardCount) for \(request.fuzzHex)")
        }
        // The dispatcher decides on the bytes that have arrived: a decision taken on a prefix must
        // not change when more bytes come.
        for length in 0..<request.count {
            let early = RelayDispatcher.route(request[..<length], shardCount: shardCount)
            if early != .needMore, early != full {
                return .violation("\(early) after \(length) bytes but \(full) after \(request.count): \(request.fuzzHex)")
            }
        }
        if case .shard = full { return .accepted }
        return .rejected
    }

    /// `ProximityDatagram(parsing:)`: service UUID, RSSI and the 20-byte advert.
    static let proximityDatagram = FuzzTarget(
        "proximity-datagram", "ProximityDatagram(parsing:) (UDP proximity stub); bytes gives the input back",
        seeds: { [try! ProximityDatagram(rssi: -45, advert: Array(repeating: 0x5A, count: 20)).bytes] }
    ) { input in
        guard let datagram = try? ProximityDatagram(parsing: input) else { return .rejected }
        return FuzzTarget.check(datagram.bytes == input, "datagram \(input.fuzzHex) does not round-trip")
    }
}
