import CTAP2
import HybridCore

/// The relay's push channel (our stand-in for FCM), `GET /cable/listen/{base64url contact ID}`: the
/// messages that travel on it. Both are one binary WebSocket message holding a canonical CBOR map
/// (Docs/LINKING.md).
///
/// Relay → phone, when a desktop contacts the phone (the FCM data message of Chromium's
/// `v2_registration.cc` carries the same three values as `caBLE.tunnelID`, `caBLE.routingID` and
/// `caBLE.clientPayload`):
///
/// | key | value |
/// | --- | --- |
/// | 1 | tunnel ID, 16 bytes |
/// | 2 | routing ID, 3 bytes |
/// | 3 | the client payload CBOR (bytes of `X-caBLE-Client-Payload`, hex-decoded) |
public struct PushMessage: Sendable, Hashable {
    /// The tunnel the desktop's contact request opened.
    public var tunnelID: [UInt8]
    /// Its routing ID.
    public var routingID: [UInt8]
    /// The desktop's client payload (CBOR bytes; parse with `ClientPayload.init(cbor:)`).
    public var clientPayload: [UInt8]

    /// Creates a message.
    public init(tunnelID: [UInt8], routingID: [UInt8], clientPayload: [UInt8]) {
        self.tunnelID = tunnelID
        self.routingID = routingID
        self.clientPayload = clientPayload
    }

    /// The CBOR encoding.
    public var encoded: [UInt8] {
        CBOR.encode([1: .bytes(tunnelID), 2: .bytes(routingID), 3: .bytes(clientPayload)])
    }

    /// Parses a push message strictly (exactly keys 1–3, 16- and 3-byte IDs).
    public init(bytes: [UInt8]) throws(RuntimeError) {
        guard let map = (try? CBOR.decode(bytes))?.mapValue, map.count == 3,
            let tunnelID = map[1]?.bytesValue, tunnelID.count == HybridConstants.tunnelIDSize,
            let routingID = map[2]?.bytesValue, routingID.count == HybridConstants.routingIDSize,
            let payload = map[3]?.bytesValue
        else {
            throw RuntimeError(.protocolViolation, "malformed push message (expected CBOR {1: tunnel ID, 2: routing ID, 3: client payload})")
        }
        self.init(tunnelID: tunnelID, routingID: routingID, clientPayload: payload)
    }
}

/// Phone → relay on the push channel: the phone will not answer this contact request. The relay
/// closes the desktop's tunnel with 1008 (policy violation) and the reason `phone refused: <reason>`.
///
/// CBOR `{1: tunnel ID (16 bytes), 2: reason (text, at most 120 bytes)}`.
public struct PushRefusal: Sendable, Hashable {
    /// The tunnel of the refused push.
    public var tunnelID: [UInt8]
    /// Why, for the desktop's error message.
    public var reason: String
    /// The phone refused because the contact ID the push came for is revoked (CBOR key 3, `true`):
    /// the relay closes the desktop's tunnel with 4410 and answers later contacts for it with 410.
    public var revoked: Bool

    /// Longest reason kept (close-frame reasons are short).
    public static let maxReasonBytes = 120

    /// Creates a refusal; the reason is cut to ``maxReasonBytes``.
    public init(tunnelID: [UInt8], reason: String, revoked: Bool = false) {
        self.tunnelID = tunnelID
        self.revoked = revoked
        var cut = reason
        while cut.utf8.count > Self.maxReasonBytes { cut.removeLast() }
        self.reason = cut
    }

    /// The CBOR encoding.
    public var encoded: [UInt8] {
        var map: [CBORValue: CBORValue] = [1: .bytes(tunnelID), 2: .text(reason)]
        if revoked { map[3] = .bool(true) }
        return CBOR.encode(.map(map))
    }

    /// Parses a refusal strictly.
    public init(bytes: [UInt8]) throws(RuntimeError) {
        guard let map = (try? CBOR.decode(bytes))?.mapValue, map.count == 2 || (map.count == 3 && map[3] == .bool(true)),
            let tunnelID = map[1]?.bytesValue, tunnelID.count == HybridConstants.tunnelIDSize,
            let reason = map[2]?.textValue, reason.utf8.count <= Self.maxReasonBytes
        else {
            throw RuntimeError(
                .protocolViolation, "malformed push refusal (expected CBOR {1: tunnel ID, 2: reason, 3?: true})")
        }
        self.init(tunnelID: tunnelID, reason: reason, revoked: map.count == 3)
    }
}

/// The listen endpoint's headers (its path is `TunnelServicePath.listenPath(contactID:)`).
public enum PushChannel {
    /// Request header carrying the phone's `ListenToken` (unpadded base64url): the relay lets a
    /// phone listen on a contact ID only with the token whose SHA-256 it is.
    public static let listenTokenHeader = "X-HybridSim-Listen-Token"

    /// Request header listing the listen tokens of contact IDs the phone revoked (comma-separated
    /// unpadded base64url), so even a relay that never saw them answers 410 for their contact IDs.
    /// Tokens, not contact IDs: a desktop holds the contact ID, and must not be able to revoke it.
    public static let revokedHeader = "X-HybridSim-Revoked-Tokens"

    /// At most this many revoked tokens are announced (and kept by the phone).
    public static let maxRevoked = 64

    /// The reason of the close (1001) a listener gets when a newer listener for the same contact ID
    /// replaced it (a phone whose old connection half-died always gets back in).
    public static let replacedReason = "replaced by a newer listener for the same contact ID"

    /// The listen token of a listen request, or `nil` unless the header is there once and is a token.
    package static func listenToken(headerValues: [String]) -> ListenToken? {
        guard headerValues.count == 1 else { return nil }
        return ListenToken(base64URL: Substring(headerValues[0]).trimmingSpacesForPush)
    }

    /// The contact IDs of the revoked tokens a listen request announces, or `nil` when the header
    /// is malformed or too long. The length is checked before anything is split, so a huge header
    /// costs no parsing.
    package static func revoked(headerValues: [String]) -> [[UInt8]]? {
        let characters = headerValues.reduce(0) { $0 + $1.utf8.count }
        guard characters <= maxRevoked * (ListenToken.encodedLength + 2) else { return nil }
        let items = headerValues.flatMap { $0.split(separator: ",") }.map { $0.trimmingSpacesForPush }
        guard items.count <= maxRevoked else { return nil }
        var out: [[UInt8]] = []
        for item in items where !item.isEmpty {
            guard let token = ListenToken(base64URL: item) else { return nil }
            out.append(token.contactID)
        }
        return out
    }
}

extension Substring {
    fileprivate var trimmingSpacesForPush: String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
