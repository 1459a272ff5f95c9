import Crypto

/// The purposes `Derive()` is used for. The raw values go on the wire (as HKDF info) and
/// must not change (Chromium `device::cablev2::DerivedValueType`).
package enum DerivedValueType: UInt32, Sendable, CaseIterable {
    /// BLE advert key: AES-256 key ‖ HMAC-SHA256 key (64 bytes).
    case eidKey = 1
    /// The tunnel ID used in `/cable/new` and `/cable/connect` (16 bytes).
    case tunnelID = 2
    /// The Noise pre-shared key (32 bytes), salted with the decrypted advert.
    case psk = 3
    /// Phone side: the per-pairing link secret (32 bytes).
    case pairedSecret = 4
    /// Phone side: seed of its long-term identity key (32 bytes).
    case identityKeySeed = 5
    /// Phone side: secret that rotates with the contact ID (32 bytes).
    case perContactIDSecret = 6
}

/// `Derive(secret, nonce, type, L)` = HKDF-SHA256 with IKM = `secret`, salt = `nonce` (may be empty,
/// which RFC 5869 treats as 32 zero bytes) and info = the type as a 4-byte little-endian integer.
package func derive(secret: [UInt8], salt: [UInt8] = [], type: DerivedValueType, count: Int) -> [UInt8] {
    let raw = type.rawValue
    let info: [UInt8] = [UInt8(raw & 0xFF), UInt8(raw >> 8 & 0xFF), UInt8(raw >> 16 & 0xFF), UInt8(raw >> 24)]
    let key = HKDF<SHA256>.deriveKey(
        inputKeyMaterial: SymmetricKey(data: secret), salt: salt, info: info, outputByteCount: count)
    return key.withUnsafeBytes { Array($0) }
}

/// The values a QR secret determines on both sides.
package struct QRSecretKeys: Sendable, Hashable {
    /// `Derive(qr_secret, –, eidKey, 64)`.
    package let eidKey: [UInt8]
    /// `Derive(qr_secret, –, tunnelID, 16)`.
    package let tunnelID: [UInt8]

    /// Derives both values from a 16-byte QR secret.
    package init(qrSecret: [UInt8]) {
        eidKey = derive(secret: qrSecret, type: .eidKey, count: HybridConstants.eidKeySize)
        tunnelID = derive(secret: qrSecret, type: .tunnelID, count: HybridConstants.tunnelIDSize)
    }
}

/// The Noise PSK: `Derive(secret, eid_plaintext, psk, 32)`, salted with the whole 16-byte
/// decrypted advert including its reserved byte.
package func derivePSK(secret: [UInt8], eidPlaintext: [UInt8]) -> [UInt8] {
    derive(secret: secret, salt: eidPlaintext, type: .psk, count: HybridConstants.pskSize)
}
