import Crypto

/// Encryption of every tunnel message after the handshake (Chromium `Crypter`, "new" construction):
///
/// ```
/// padded = message ‖ 0x00 × z ‖ byte(z)      // length a multiple of 32, z in 0…31
/// wire   = AES-256-GCM(key, nonce = 0x00 × 8 ‖ uint32_be(seq), aad = empty, padded) ‖ tag
/// ```
/// Each direction has its own key and sequence number starting at 0. A sequence number above
/// 2^24 − 1 is refused, as Chromium does.
package struct Crypter: Sendable {
    private let readKey: SymmetricKey
    private let writeKey: SymmetricKey
    /// Sequence number of the next message to decrypt.
    package private(set) var readSequence: UInt32
    /// Sequence number of the next message to encrypt.
    package private(set) var writeSequence: UInt32

    /// Creates a crypter from 32-byte traffic keys, sequence numbers at zero
    /// (the desktop reads k2 and writes k1; the phone the reverse).
    package init(readKey: [UInt8], writeKey: [UInt8]) {
        self.init(readKey: readKey, writeKey: writeKey, readSequence: 0, writeSequence: 0)
    }

    /// Creates a crypter at given sequence numbers (for tests of the sequence limit).
    package init(readKey: [UInt8], writeKey: [UInt8], readSequence: UInt32, writeSequence: UInt32) {
        precondition(readKey.count == 32 && writeKey.count == 32, "traffic keys are 32 bytes")
        self.readKey = SymmetricKey(data: readKey)
        self.writeKey = SymmetricKey(data: writeKey)
        self.readSequence = readSequence
        self.writeSequence = writeSequence
    }

    /// Pads, encrypts and advances the write sequence number.
    package mutating func encrypt(_ message: [UInt8]) throws(HybridError) -> [UInt8] {
        guard writeSequence <= HybridConstants.maxSequence else {
            throw HybridError(.sequenceExhausted, "write sequence number exhausted (2^24 messages)")
        }
        let padded = Self.pad(message)
        let sealed: AES.GCM.SealedBox
        do {
            sealed = try AES.GCM.seal(padded, using: writeKey, nonce: Self.nonce(writeSequence))
        } catch {
            preconditionFailure("AES-GCM seal with a valid key and nonce cannot fail: \(error)")
        }
        writeSequence += 1
        return Array(sealed.ciphertext) + Array(sealed.tag)
    }

    /// Decrypts, unpads and advances the read sequence number. On failure nothing changes.
    package mutating func decrypt(_ ciphertext: [UInt8]) throws(HybridError) -> [UInt8] {
        guard readSequence <= HybridConstants.maxSequence else {
            throw HybridError(.sequenceExhausted, "read sequence number exhausted (2^24 messages)")
        }
        guard ciphertext.count >= 16 + HybridConstants.paddingGranularity else {
            throw HybridError(.decryptionFailed, "message of \(ciphertext.count) bytes is shorter than one padded block and a tag")
        }
        let padded: [UInt8]
        do {
            let box = try AES.GCM.SealedBox(
                nonce: Self.nonce(readSequence), ciphertext: ciphertext.dropLast(16), tag: ciphertext.suffix(16))
            padded = Array(try AES.GCM.open(box, using: readKey))
        } catch {
            // 65 + 16 bytes: the size of a handshake message (an ephemeral key and an empty payload's
            // tag), which a padded transport message never is.
            let handshakeSized = ciphertext.count == 81 ? "; it is 81 bytes, the size of a handshake message: was one sent again?" : ""
            throw HybridError(
                .decryptionFailed, "message \(readSequence) does not authenticate (tampered, reordered or wrong key)\(handshakeSized)")
        }
        let message = try Self.unpad(padded)
        readSequence += 1
        return message
    }

    /// The length on the wire of a `plaintext`-byte message: padded to the next multiple of 32
    /// above it, then the 16-byte tag.
    package static func ciphertextLength(plaintext: Int) -> Int {
        let granularity = HybridConstants.paddingGranularity
        return (plaintext + 1 + granularity - 1) / granularity * granularity + 16
    }

    /// Appends zeros and a count byte so the length is the next multiple of 32 above `message.count`.
    package static func pad(_ message: [UInt8]) -> [UInt8] {
        let granularity = HybridConstants.paddingGranularity
        let paddedLength = (message.count + 1 + granularity - 1) / granularity * granularity
        let zeros = paddedLength - message.count - 1
        return message + [UInt8](repeating: 0, count: zeros) + [UInt8(zeros)]
    }

    /// Removes padding: the last byte counts the zeros before it. Like Chromium, the zeros
    /// themselves are not checked. An empty input or a count longer than the input is an error.
    package static func unpad(_ padded: [UInt8]) throws(HybridError) -> [UInt8] {
        guard let count = padded.last else { throw HybridError(.invalidPadding, "padded message is empty") }
        guard Int(count) + 1 <= padded.count else {
            throw HybridError(.invalidPadding, "padding count \(count) exceeds the message length \(padded.count)")
        }
        return Array(padded.dropLast(Int(count) + 1))
    }

    /// The "new" construction nonce: eight zero bytes ‖ big-endian 32-bit sequence number.
    package static func nonceBytes(_ sequence: UInt32) -> [UInt8] {
        [UInt8](repeating: 0, count: 8)
            + [UInt8(sequence >> 24), UInt8(sequence >> 16 & 0xFF), UInt8(sequence >> 8 & 0xFF), UInt8(sequence & 0xFF)]
    }

    private static func nonce(_ sequence: UInt32) -> AES.GCM.Nonce {
        do {
            return try AES.GCM.Nonce(data: nonceBytes(sequence))
        } catch {
            preconditionFailure("a 12-byte AES-GCM nonce is always valid: \(error)")
        }
    }
}
