import CTAP2
import Crypto

/// Linking ("pairing") information a phone may send so the desktop can contact it later without a
/// QR code (Chromium `Pairing::Parse`, `PairingDataGenerator`).
///
/// | key | content |
/// | --- | --- |
/// | 1 | contact ID (an FCM token on Android) |
/// | 2 | pairing ID, 8 bytes |
/// | 3 | link secret, 32 bytes |
/// | 4 | the phone's identity public key, 65 bytes uncompressed |
/// | 5 | the phone's display name |
/// | 6 | HMAC-SHA256(key = ECDH(phone identity, desktop QR identity), handshake hash) |
/// | 999 | optional "from the new implementation" flag |
public struct LinkingInfo: Sendable, Hashable {
    /// Key 1: the contact ID for `/cable/contact`.
    public var contactID: [UInt8]
    /// Key 2: the pairing ID (8 bytes).
    public var pairingID: [UInt8]
    /// Key 3: the link secret (32 bytes).
    public var linkSecret: [UInt8]
    /// Key 4: the phone's identity public key, X9.62 uncompressed (65 bytes).
    public var authenticatorPublicKey: [UInt8]
    /// Key 5: the phone's name.
    public var name: String
    /// Key 6: the signature binding this information to the handshake (32 bytes).
    public var handshakeSignature: [UInt8]
    /// Key 999, if present.
    public var fromNewImplementation: Bool?

    /// Creates linking information.
    public init(
        contactID: [UInt8], pairingID: [UInt8], linkSecret: [UInt8], authenticatorPublicKey: [UInt8],
        name: String, handshakeSignature: [UInt8], fromNewImplementation: Bool? = nil
    ) {
        self.contactID = contactID
        self.pairingID = pairingID
        self.linkSecret = linkSecret
        self.authenticatorPublicKey = authenticatorPublicKey
        self.name = name
        self.handshakeSignature = handshakeSignature
        self.fromNewImplementation = fromNewImplementation
    }

    /// The linking map.
    public var cbor: CBORValue {
        var map: [CBORValue: CBORValue] = [
            1: .bytes(contactID), 2: .bytes(pairingID), 3: .bytes(linkSecret),
            4: .bytes(authenticatorPublicKey), 5: .text(name), 6: .bytes(handshakeSignature),
        ]
        if let fromNewImplementation { map[999] = .bool(fromNewImplementation) }
        return .map(map)
    }

    /// Parses a linking map: keys 1–6 of their types, with the sizes Chrome on Android sends (an
    /// 8-byte pairing ID, a 32-byte link secret, a 65-byte public key, a 32-byte signature).
    /// Chromium's `Pairing::Parse` checks only the types and the key's and signature's sizes; the
    /// linked flow needs the others (Docs/PROTOCOL-TOLERANCE.md).
    public init(cbor: CBORValue) throws(HybridError) {
        guard let map = cbor.mapValue else { throw HybridError(.invalidLinkingInfo, "not a map") }
        func bytes(_ key: Int, _ name: String, count: Int? = nil) throws(HybridError) -> [UInt8] {
            guard let value = map[.int(key)]?.bytesValue else {
                throw HybridError(.invalidLinkingInfo, "key \(key) (\(name)) missing or not a byte string")
            }
            if let count, value.count != count {
                throw HybridError(.invalidLinkingInfo, "key \(key) (\(name)) is \(value.count) bytes, expected \(count)")
            }
            return value
        }
        contactID = try bytes(1, "contact ID")
        pairingID = try bytes(2, "pairing ID", count: HybridConstants.pairingIDSize)
        linkSecret = try bytes(3, "link secret", count: 32)
        authenticatorPublicKey = try bytes(4, "public key", count: HybridConstants.uncompressedPublicKeySize)
        guard let name = map[5]?.textValue else { throw HybridError(.invalidLinkingInfo, "key 5 (name) missing or not a string") }
        self.name = name
        handshakeSignature = try bytes(6, "handshake signature", count: 32)
        fromNewImplementation = map[999]?.boolValue
    }

    /// Key 6 as the phone computes it: HMAC-SHA256 keyed with the ECDH of the phone's identity key
    /// and the desktop's QR identity key, over the handshake hash.
    public static func handshakeSignature(
        authenticatorIdentity: P256.KeyAgreement.PrivateKey, clientIdentity: P256.KeyAgreement.PublicKey,
        handshakeHash: [UInt8]
    ) -> [UInt8] {
        let secret = NoiseHandshake.dh(authenticatorIdentity, clientIdentity)
        return Array(HMAC<SHA256>.authenticationCode(for: handshakeHash, using: SymmetricKey(data: secret)))
    }

    /// Verifies key 6 as the desktop does, with its QR identity private key. Throws
    /// ``HybridError/Code/invalidLinkingInfo`` if the public key is invalid or the signature differs.
    public func verify(clientIdentity: P256.KeyAgreement.PrivateKey, handshakeHash: [UInt8]) throws(HybridError) {
        let peer: P256.KeyAgreement.PublicKey
        do {
            peer = try P256.KeyAgreement.PublicKey(x963Representation: authenticatorPublicKey)
        } catch {
            throw HybridError(.invalidLinkingInfo, "key 4 is not a valid P-256 point")
        }
        let secret = NoiseHandshake.dh(clientIdentity, peer)
        guard HMAC<SHA256>.isValidAuthenticationCode(
            handshakeSignature, authenticating: handshakeHash, using: SymmetricKey(data: secret))
        else {
            throw HybridError(.invalidLinkingInfo, "handshake signature does not verify")
        }
    }
}
