import CTAP2

/// Builders for the tunnel service's URLs (Chromium `GetNewTunnelURL`, `GetConnectURL`,
/// `GetContactURL`). IDs are upper-case hex as Chromium's `base::HexEncode` writes them.
///
/// `base` is the scheme and authority, e.g. `wss://cable.ua5v.com` or, for the simulator's
/// loopback relay, `ws://127.0.0.1:47001`.
public enum TunnelURLs {
    /// The base URL of a real domain: `wss://{host}`, or `nil` if the ID is unknown.
    public static func base(for domain: TunnelDomainID) -> String? {
        domain.host.map { "wss://\($0)" }
    }

    /// Path the phone opens to create a tunnel: `/cable/new/{TUNNEL_ID}`.
    public static func newTunnelPath(tunnelID: [UInt8]) -> String {
        "/cable/new/" + Hex.encode(tunnelID, uppercase: true)
    }

    /// Path the desktop opens to join: `/cable/connect/{ROUTING_ID}/{TUNNEL_ID}`.
    public static func connectPath(routingID: [UInt8], tunnelID: [UInt8]) -> String {
        "/cable/connect/" + Hex.encode(routingID, uppercase: true) + "/" + Hex.encode(tunnelID, uppercase: true)
    }

    /// Path the desktop opens to reach a linked phone: `/cable/contact/{base64url(contact ID)}`.
    public static func contactPath(contactID: [UInt8]) -> String {
        "/cable/contact/" + Base64URL.encode(contactID)
    }

    /// The `X-caBLE-Client-Payload` header value of the linked flow:
    /// upper-case hex of CBOR `{1: pairing ID, 2: client nonce, 3: "ga" | "mc"}`.
    public static func clientPayloadHeader(
        pairingID: [UInt8], clientNonce: [UInt8], requestType: QRPayload.RequestType
    ) -> String {
        let payload: CBORValue = [1: .bytes(pairingID), 2: .bytes(clientNonce), 3: .text(requestType.rawValue)]
        return Hex.encode(CBOR.encode(payload), uppercase: true)
    }
}
