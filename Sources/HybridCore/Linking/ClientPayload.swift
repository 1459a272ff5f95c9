import CTAP2

/// The `X-caBLE-Client-Payload` of a linked (state-assisted) transaction: the CBOR map
/// `{1: pairing ID (8 bytes), 2: client nonce (16 bytes), 3: "ga" | "mc"}` the desktop sends with
/// `/cable/contact/…` and the tunnel service hands to the phone (Chromium `fido_tunnel_device.cc`,
/// second constructor; `v2_authenticator.cc` `TransactFromFCM`).
public struct ClientPayload: Sendable, Hashable {
    /// Key 1: which link the desktop uses (the pairing ID from the linking information).
    public var pairingID: [UInt8]
    /// Key 2: 16 fresh random bytes; the EID key is `Derive(link secret, nonce, 1, 64)`.
    public var clientNonce: [UInt8]
    /// Key 3: the request the desktop is about to send.
    public var requestType: QRPayload.RequestType

    /// Size of the client nonce.
    public static let nonceSize = 16

    /// Creates a payload.
    public init(pairingID: [UInt8], clientNonce: [UInt8], requestType: QRPayload.RequestType) {
        self.pairingID = pairingID
        self.clientNonce = clientNonce
        self.requestType = requestType
    }

    /// The canonical CBOR encoding.
    public var cbor: [UInt8] {
        CBOR.encode([1: .bytes(pairingID), 2: .bytes(clientNonce), 3: .text(requestType.rawValue)])
    }

    /// The header value: upper-case hex of ``cbor`` (Chromium `base::HexEncode`).
    public var headerValue: String { Hex.encode(cbor, uppercase: true) }

    /// Parses the CBOR bytes: a map whose keys 1–3 are an 8-byte pairing ID, a 16-byte nonce and
    /// `"ga"` or `"mc"`. Other keys are ignored, as Chromium's phone ignores them
    /// (`v2_registration.cc`, `MessageToEvent` reads keys 1–3 only): a newer desktop may add one.
    public init(cbor bytes: [UInt8]) throws(HybridError) {
        let value: CBORValue
        do {
            value = try CBOR.decode(bytes)
        } catch {
            throw HybridError(.invalidLinkingInfo, "client payload is not CBOR: \(error)")
        }
        guard let map = value.mapValue else { throw HybridError(.invalidLinkingInfo, "client payload is not a map") }
        guard let pairingID = map[1]?.bytesValue, pairingID.count == HybridConstants.pairingIDSize else {
            throw HybridError(.invalidLinkingInfo, "client payload key 1 (pairing ID) is not 8 bytes")
        }
        guard let nonce = map[2]?.bytesValue, nonce.count == Self.nonceSize else {
            throw HybridError(.invalidLinkingInfo, "client payload key 2 (client nonce) is not 16 bytes")
        }
        guard let text = map[3]?.textValue, let request = QRPayload.RequestType(rawValue: text) else {
            throw HybridError(.invalidLinkingInfo, "client payload key 3 is not \"ga\" or \"mc\"")
        }
        self.init(pairingID: pairingID, clientNonce: nonce, requestType: request)
    }
}

extension LinkingInfo {
    /// The link secret of linking-map key 3, as the phone derives it from its root secret:
    /// `Derive(Derive(root, contact ID, 6, 32), pairing ID, 4, 32)` (Chromium `v2_authenticator.cc`).
    public static func pairedSecret(rootSecret: [UInt8], contactID: [UInt8], pairingID: [UInt8]) -> [UInt8] {
        let perContact = derive(secret: rootSecret, salt: contactID, type: .perContactIDSecret, count: 32)
        return derive(secret: perContact, salt: pairingID, type: .pairedSecret, count: 32)
    }
}
