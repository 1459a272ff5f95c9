/// Wire constants of the hybrid transport. These are protocol values and must not change.
/// Names follow Chromium `device/fido/cable/v2_constants.h`.
public enum HybridConstants {
    /// Size of the QR secret (`kQRSecretSize`).
    public static let qrSecretSize = 16
    /// Size of a compressed P-256 point in the QR code.
    public static let compressedPublicKeySize = 33
    /// Size of an uncompressed X9.62 P-256 point as used inside Noise.
    public static let uncompressedPublicKeySize = 65
    /// Size of the EID key: AES-256 key ‖ HMAC-SHA256 key (`kEIDKeySize`).
    public static let eidKeySize = 64
    /// Size of the advert plaintext, one AES block.
    public static let eidSize = 16
    /// Size of the advert on the air: encrypted EID ‖ 4-byte HMAC tag (`kAdvertSize`).
    public static let advertSize = 20
    /// Size of the connection nonce inside the EID (`kNonceSize`).
    public static let nonceSize = 10
    /// Size of the routing ID (`kRoutingIdSize`).
    public static let routingIDSize = 3
    /// Size of the tunnel ID (`kTunnelIdSize`).
    public static let tunnelIDSize = 16
    /// Size of the Noise pre-shared key.
    public static let pskSize = 32
    /// Size of a Noise handshake message: 65-byte point ‖ 16-byte AES-GCM tag.
    public static let handshakeMessageSize = 65 + 16
    /// Transport plaintexts are padded to a multiple of this.
    public static let paddingGranularity = 32
    /// Chromium refuses to use a sequence number above this (`kMaxSequence`, 2^24 − 1).
    public static let maxSequence: UInt32 = (1 << 24) - 1
    /// Chromium phones pad the update message so its ciphertext is exactly 528 bytes.
    public static let updateMessagePaddingTarget = 512
    /// Number of assigned tunnel-server domains a current client knows (`cable.ua5v.com`, `cable.auth.com`).
    public static let assignedDomainCount = 2
    /// Size of the pairing ID in linking information (`kPairingIDSize`).
    public static let pairingIDSize = 8
    /// The `FIDO:/` URL prefix (compared case-insensitively when parsing).
    public static let qrPrefix = "FIDO:/"
    /// BLE service UUID assigned to FIDO (current).
    public static let fidoServiceUUID: UInt16 = 0xFFF9
    /// BLE service UUID assigned to Google (older Android and iOS 16).
    public static let googleServiceUUID: UInt16 = 0xFDE2
    /// The WebSocket subprotocol of the tunnel service.
    public static let webSocketProtocol = "fido.cable"
    /// Response header carrying the routing ID on `/cable/new`.
    public static let routingIDHeader = "X-caBLE-Routing-ID"
    /// Request header carrying the hex client payload on `/cable/contact`.
    public static let clientPayloadHeader = "X-caBLE-Client-Payload"
}
