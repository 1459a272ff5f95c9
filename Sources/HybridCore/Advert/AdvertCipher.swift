import Crypto
import CryptoExtras

/// Encrypts and trial-decrypts the 20-byte proximity advert:
/// `AES-256(eidKey[0..<32], plaintext) ‖ HMAC-SHA256(eidKey[32..<64], ciphertext)[0..<4]`.
/// Mirrors Chromium `eid::Encrypt` / `eid::Decrypt`.
package struct AdvertCipher: Sendable {
    /// The outcome of trying an advert against this key.
    package enum Decryption: Sendable, Hashable {
        /// The advert is for this session; the plaintext (for the PSK) and its fields.
        case matched(plaintext: [UInt8], eid: EID)
        /// Wrong length or tag: another session's advert, or noise. Not an error.
        case notOurs
        /// The tag matched but the plaintext breaks a rule (reserved byte, unknown domain).
        case rejected(HybridError)
    }

    private let aesKey: SymmetricKey
    private let macKey: SymmetricKey

    /// Creates a cipher from a 64-byte EID key (``QRSecretKeys/eidKey``).
    package init(eidKey: [UInt8]) {
        precondition(eidKey.count == HybridConstants.eidKeySize, "EID key must be 64 bytes")
        aesKey = SymmetricKey(data: eidKey[0..<32])
        macKey = SymmetricKey(data: eidKey[32..<64])
    }

    /// Encrypts a 16-byte plaintext into a 20-byte advert.
    package func encrypt(plaintext: [UInt8]) -> [UInt8] {
        precondition(plaintext.count == HybridConstants.eidSize, "advert plaintext must be 16 bytes")
        var block = plaintext
        do {
            try AES.permute(&block, key: aesKey)
        } catch {
            preconditionFailure("AES-256 on one block with a 32-byte key cannot fail: \(error)")
        }
        return block + tag(for: block)
    }

    /// Trial-decrypts an advert with the desktop's checks: exact length, tag (compared in
    /// constant time), then the plaintext rules of ``EID/init(bytes:)``.
    package func decrypt(advert: [UInt8]) -> Decryption {
        guard advert.count == HybridConstants.advertSize else { return .notOurs }
        var block = Array(advert[0..<16])
        guard constantTimeEqual(tag(for: block), Array(advert[16..<20])) else { return .notOurs }
        do {
            try AES.inversePermute(&block, key: aesKey)
        } catch {
            preconditionFailure("AES-256 on one block with a 32-byte key cannot fail: \(error)")
        }
        do {
            return .matched(plaintext: block, eid: try EID(bytes: block))
        } catch {
            return .rejected(error)
        }
    }

    private func tag(for ciphertext: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: ciphertext, using: macKey).prefix(4))
    }
}

/// Compares two byte strings without an early exit, so timing does not reveal where they differ
/// (only whether their lengths do: compare secrets of a fixed, public length).
package func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for i in a.indices { difference |= a[i] ^ b[i] }
    return difference == 0
}
