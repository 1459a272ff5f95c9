import Crypto

/// The Noise `SymmetricState` (Noise spec §5.2) with the caBLE choices: SHA-256, HKDF-SHA256 with
/// salt = `ck` and empty info, AES-256-GCM with the handshake hash as associated data.
/// Mirrors Chromium `device::Noise`.
///
/// Public so protocol testers can replay or perturb individual steps; ordinary callers use
/// ``NoiseHandshake``.
package struct SymmetricState: Sendable {
    /// The chaining key `ck`.
    package private(set) var chainingKey: [UInt8]
    /// The handshake hash `h`.
    package private(set) var handshakeHash: [UInt8]
    /// The cipher key `k`, once a `MixKey` has run.
    package private(set) var cipherKey: [UInt8]?
    /// The cipher nonce `n`, reset by every `MixKey`.
    package private(set) var nonce: UInt32 = 0

    /// `InitializeSymmetric(protocol_name)`: the 32-byte name (31 characters and a NUL) is used as
    /// the initial `h` and `ck` directly.
    package init(protocolName: [UInt8]) {
        precondition(protocolName.count == 32, "caBLE protocol names are exactly 32 bytes")
        chainingKey = protocolName
        handshakeHash = protocolName
    }

    /// `MixHash(data)`: `h = SHA-256(h ‖ data)`.
    package mutating func mixHash(_ data: [UInt8]) {
        var hasher = SHA256()
        hasher.update(data: handshakeHash)
        hasher.update(data: data)
        handshakeHash = Array(hasher.finalize())
    }

    /// `MixKey(ikm)`: `ck, k = HKDF(ck, ikm, 2)`; `n = 0`.
    package mutating func mixKey(_ inputKeyMaterial: [UInt8]) {
        let out = Self.hkdf(salt: chainingKey, ikm: inputKeyMaterial, count: 64)
        chainingKey = Array(out[0..<32])
        cipherKey = Array(out[32..<64])
        nonce = 0
    }

    /// `MixKeyAndHash(ikm)`: `ck, temp_h, k = HKDF(ck, ikm, 3)`; `MixHash(temp_h)`; `n = 0`.
    package mutating func mixKeyAndHash(_ inputKeyMaterial: [UInt8]) {
        let out = Self.hkdf(salt: chainingKey, ikm: inputKeyMaterial, count: 96)
        chainingKey = Array(out[0..<32])
        mixHash(Array(out[32..<64]))
        cipherKey = Array(out[64..<96])
        nonce = 0
    }

    /// `EncryptAndHash(plaintext)`: AES-256-GCM under `k` with `h` as associated data, then `MixHash`
    /// of the ciphertext ‖ tag.
    package mutating func encryptAndHash(_ plaintext: [UInt8]) -> [UInt8] {
        guard let cipherKey else { preconditionFailure("EncryptAndHash before any MixKey") }
        let sealed: AES.GCM.SealedBox
        do {
            sealed = try AES.GCM.seal(
                plaintext, using: SymmetricKey(data: cipherKey), nonce: try currentNonce(),
                authenticating: handshakeHash)
        } catch {
            preconditionFailure("AES-GCM seal with a valid key and nonce cannot fail: \(error)")
        }
        nonce += 1
        let ciphertext = Array(sealed.ciphertext) + Array(sealed.tag)
        mixHash(ciphertext)
        return ciphertext
    }

    /// `DecryptAndHash(ciphertext)`: the inverse of ``encryptAndHash(_:)``; `h` changes only on success.
    package mutating func decryptAndHash(_ ciphertext: [UInt8]) throws(HybridError) -> [UInt8] {
        guard let cipherKey else { preconditionFailure("DecryptAndHash before any MixKey") }
        guard ciphertext.count >= 16 else {
            throw HybridError(.handshakeFailed, "handshake ciphertext shorter than its 16-byte tag")
        }
        let plaintext: [UInt8]
        do {
            let box = try AES.GCM.SealedBox(
                nonce: try currentNonce(), ciphertext: ciphertext.dropLast(16), tag: ciphertext.suffix(16))
            plaintext = Array(try AES.GCM.open(box, using: SymmetricKey(data: cipherKey), authenticating: handshakeHash))
        } catch {
            throw HybridError(.handshakeFailed, "handshake message does not authenticate (wrong PSK, key or transcript)")
        }
        nonce += 1
        mixHash(ciphertext)
        return plaintext
    }

    /// `Split()`: `k1, k2 = HKDF(ck, empty, 2)`. The initiator writes with k1, the responder with k2.
    package func split() -> (initiatorToResponder: [UInt8], responderToInitiator: [UInt8]) {
        let out = Self.hkdf(salt: chainingKey, ikm: [], count: 64)
        return (Array(out[0..<32]), Array(out[32..<64]))
    }

    /// Chromium's handshake nonce: the big-endian counter in the first four bytes of twelve.
    /// Every handshake key encrypts one message, so in practice it is always twelve zero bytes.
    private func currentNonce() throws -> AES.GCM.Nonce {
        let n = nonce
        return try AES.GCM.Nonce(data: [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] + [UInt8](repeating: 0, count: 8))
    }

    static func hkdf(salt: [UInt8], ikm: [UInt8], count: Int) -> [UInt8] {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: ikm), salt: salt, info: [UInt8](), outputByteCount: count
        ).withUnsafeBytes { Array($0) }
    }
}
