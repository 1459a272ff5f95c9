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
    public init?(parsing target: String) {
        guard target.utf8.count <= Self.maxPathLength, target.hasPrefix("/cable/") else { return nil }
        let segments = target.split(separator: "/", omittingEmptySubsequences: false)
        // "/cable/new/X" splits into ["", "cable", "new", "X"].
        guard segments.count >= 4, segments[0].isEmpty else { return nil }
        switch (segments[2], segments.count) {
        case ("new", 4):
            guard let tunnelID = Hex.decode(segments[3], byteCount: HybridConstants.tunnelIDSize) else { return nil }
            self = .new(tunnelID: tunnelID)
        case ("connect", 5):
            guard let routingID = Hex.decode(segments[3], byteCount: HybridConstants.routingIDSize),
                let tunnelID = Hex.decode(segments[4], byteCount: HybridConstants.tunnelIDSize)
            else { return nil }
            self = .connect(routingID: routingID, tunnelID: tunnelID)
        case ("contact", 4):
            guard let contactID = Base64URL.decodeUnpadded(segments[3]), !contactID.isEmpty else { return nil }
            self = .contact(contactID: contactID)
        default:
            return nil
        }
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
