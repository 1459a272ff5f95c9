import CTAP2

/// A request path of the tunnel service (Docs/PROTOCOL.md §4.2), built canonically or parsed strictly.
/// This is the one place the tunnel service's paths are spelled; the sizes, header names and
/// subprotocol they go with are ``HybridConstants/tunnelIDSize``, ``HybridConstants/routingIDSize``,
/// ``HybridConstants/routingIDHeader``, ``HybridConstants/clientPayloadHeader`` and
/// ``HybridConstants/webSocketProtocol``.
///
/// Paths are built with upper-case hex (as Chromium's `base::HexEncode` writes them, `GetNewTunnelURL`,
/// `GetConnectURL`) and unpadded base64url (`GetContactURL`), and parsed with hex of either case.
/// Parsing rejects anything that is not exactly one of the three shapes: no query string, no trailing
/// `/`, no empty or extra segments, no `..`, exact hex lengths, canonical unpadded base64url (a second
/// spelling of the same contact ID is refused, see `CTAP2.Base64URL`).
public enum TunnelServicePath: Sendable, Hashable {
    /// `/cable/new/{HEX(tunnel ID, 16 bytes)}`: the authenticator opens a tunnel.
    case new(tunnelID: [UInt8])
    /// `/cable/connect/{HEX(routing ID, 3 bytes)}/{HEX(tunnel ID, 16 bytes)}`: the client joins it.
    case connect(routingID: [UInt8], tunnelID: [UInt8])
    /// `/cable/contact/{base64url(contact ID)}`: the client contacts a linked authenticator.
    case contact(contactID: [UInt8])

    /// Longest accepted request target, in characters (contact IDs are the long ones).
    public static let maxPathLength = 512

    /// The canonical path: upper-case hex, unpadded base64url.
    public var path: String {
        switch self {
        case .new(let tunnelID):
            return "/cable/new/" + Hex.encode(tunnelID, uppercase: true)
        case .connect(let routingID, let tunnelID):
            return "/cable/connect/" + Hex.encode(routingID, uppercase: true) + "/" + Hex.encode(tunnelID, uppercase: true)
        case .contact(let contactID):
            return "/cable/contact/" + Base64URL.encode(contactID)
        }
    }

    /// Parses a request target; `nil` unless it is exactly one of the three shapes.
    ///
    /// Reads the target's UTF-8 bytes (every accepted target is ASCII), so a relay pays no
    /// `Character` splitting or generic hex decoding per request.
    public init?(parsing target: String) {
        var target = target
        guard let parsed = target.withUTF8({ Self.parse(utf8: $0) }) else { return nil }
        self = parsed
    }

    private static let prefix = Array("/cable/".utf8)

    /// ``init(parsing:)`` on the target's bytes.
    private static func parse(utf8 target: UnsafeBufferPointer<UInt8>) -> TunnelServicePath? {
        guard target.count <= maxPathLength, target.starts(with: prefix) else { return nil }
        let slash = UInt8(ascii: "/")
        let end = target.endIndex
        // "/cable/{keyword}/{segment}" or "/cable/connect/{segment}/{segment}": no other "/".
        guard let keywordEnd = target[prefix.count..<end].firstIndex(of: slash) else { return nil }
        let keyword = target[prefix.count..<keywordEnd]
        let first = keywordEnd + 1
        let secondSlash = target[first..<end].firstIndex(of: slash)
        if keyword.elementsEqual("new".utf8), secondSlash == nil {
            guard let tunnelID = Hex.decode(ascii: target[first..<end], byteCount: HybridConstants.tunnelIDSize) else { return nil }
            return .new(tunnelID: tunnelID)
        }
        if keyword.elementsEqual("contact".utf8), secondSlash == nil {
            let encoded = String(decoding: target[first..<end], as: UTF8.self)
            guard let contactID = Base64URL.decodeUnpadded(encoded), !contactID.isEmpty else { return nil }
            return .contact(contactID: contactID)
        }
        if keyword.elementsEqual("connect".utf8), let secondSlash {
            let second = secondSlash + 1
            guard !target[second..<end].contains(slash),
                let routingID = Hex.decode(ascii: target[first..<secondSlash], byteCount: HybridConstants.routingIDSize),
                let tunnelID = Hex.decode(ascii: target[second..<end], byteCount: HybridConstants.tunnelIDSize)
            else { return nil }
            return .connect(routingID: routingID, tunnelID: tunnelID)
        }
        return nil
    }

    // MARK: - The simulator's push channel

    /// `/cable/listen/{base64url(contact ID)}`: the simulator's stand-in for FCM, where a linked phone
    /// waits for contact requests (Docs/LINKING.md). Not part of Chromium's tunnel service.
    public static func listenPath(contactID: [UInt8]) -> String { "/cable/listen/" + Base64URL.encode(contactID) }

    /// The contact ID of a `/cable/listen/{id}` target (canonical unpadded base64url, not empty);
    /// `nil` for any other target.
    public static func listenContactID(parsing target: String) -> [UInt8]? {
        guard target.utf8.count <= maxPathLength, target.hasPrefix("/cable/listen/") else { return nil }
        let encoded = target.dropFirst("/cable/listen/".count)
        guard !encoded.contains("/"), let id = Base64URL.decodeUnpadded(encoded), !id.isEmpty else { return nil }
        return id
    }
}

extension TunnelDomainID {
    /// The base URL of the domain's tunnel service, `wss://{host}`, or `nil` if the ID is unknown.
    /// (For the simulator's loopback relay the base is e.g. `ws://127.0.0.1:47001`.)
    public var baseURL: String? { host.map { "wss://\($0)" } }
}
