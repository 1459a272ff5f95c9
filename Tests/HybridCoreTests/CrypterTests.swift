import CTAP2
import Crypto
import HybridCore
import HybridTestSupport
import Testing

/// `Crypter` against `Vectors/crypter.json` (webauthn-rs `construction`, padding, unpadding, nonces),
/// Chromium's `MessageEncryption` round trip, tampering and the 2^24 limit (PROTOCOL.md §6).
@Suite struct CrypterTests {
    struct Vector: Decodable, Sendable, CustomTestStringConvertible {
        let name: String
        let k1: String
        let k2: String
        let sequence: UInt32
        let nonce: String
        let plaintext: String
        let padded: String
        let ciphertext: String
        var testDescription: String { name }
    }
    struct Padding: Decodable, Sendable { let length, paddedLength, lastByte: Int }
    struct Unpad: Decodable, Sendable {
        let input: String
        let output: String?
        let expectError: String?
    }
    struct Nonce: Decodable, Sendable {
        let sequence: UInt32
        let nonce: String
    }
    struct File: Decodable, Sendable {
        let vectors: [Vector]
        let padding: [Padding]
        let unpad: [Unpad]
        let nonces: [Nonce]
    }

    static func file() throws -> File { try Vectors.load("crypter", as: File.self) }

    // MARK: - Known answers

    @Test("the encrypting side (write key k1) produces the ciphertext", arguments: try file().vectors)
    func encrypts(_ vector: Vector) throws {
        var desktop = Crypter(readKey: hex(vector.k2), writeKey: hex(vector.k1), readSequence: 0, writeSequence: vector.sequence)
        #expect(Hex.encode(Crypter.pad(hex(vector.plaintext))) == vector.padded)
        #expect(Hex.encode(Crypter.nonceBytes(vector.sequence)) == vector.nonce)
        #expect(Hex.encode(try desktop.encrypt(hex(vector.plaintext))) == vector.ciphertext)
        #expect(desktop.writeSequence == vector.sequence + 1)
        #expect(desktop.readSequence == 0)
    }

    @Test("the decrypting side (read key k1) recovers the plaintext", arguments: try file().vectors)
    func decrypts(_ vector: Vector) throws {
        var phone = Crypter(readKey: hex(vector.k1), writeKey: hex(vector.k2), readSequence: vector.sequence, writeSequence: 0)
        #expect(Hex.encode(try phone.decrypt(hex(vector.ciphertext))) == vector.plaintext)
        #expect(phone.readSequence == vector.sequence + 1)
        #expect(phone.writeSequence == 0)
    }

    /// The webauthn-rs message and the shutdown are consecutive messages of one direction.
    @Test("the two vectors in sequence through public initializers")
    func inSequence() throws {
        let vectors = try Self.file().vectors
        #expect(vectors.map(\.sequence) == [0, 1])
        var desktop = Crypter(readKey: hex(vectors[0].k2), writeKey: hex(vectors[0].k1))
        var phone = Crypter(readKey: hex(vectors[0].k1), writeKey: hex(vectors[0].k2))
        for vector in vectors {
            let ciphertext = try desktop.encrypt(hex(vector.plaintext))
            #expect(Hex.encode(ciphertext) == vector.ciphertext)
            #expect(Hex.encode(try phone.decrypt(ciphertext)) == vector.plaintext)
        }
        // The raw AES-GCM: nonce from the vector, no associated data.
        let vector = vectors[1]
        let box = try AES.GCM.SealedBox(
            nonce: AES.GCM.Nonce(data: hex(vector.nonce)), ciphertext: hex(vector.ciphertext).dropLast(16),
            tag: hex(vector.ciphertext).suffix(16))
        #expect(Hex.encode(Array(try AES.GCM.open(box, using: SymmetricKey(data: hex(vector.k1))))) == vector.padded)
    }

    /// The keys are the halves of kdf.json's "HKDF Noise Split (Chromium debug log)" output.
    @Test func keysAreTheChromiumSplit() throws {
        let vector = try #require(try Self.file().vectors.first)
        #expect(vector.k1 + vector.k2 == "1fba3cce17622c68268d9f75b5a8a3351b517f096fb5e294941af7e3a6a8d6e1e34f1aa3747238c04d3bd25e07ef1b35fef359000d755615cd85be27cfc807d1")
    }

    @Test("padding table", arguments: try file().padding)
    func padding(_ row: Padding) throws {
        let message = [UInt8](repeating: 0xA5, count: row.length)
        let padded = Crypter.pad(message)
        #expect(padded.count == row.paddedLength)
        #expect(padded.count % HybridConstants.paddingGranularity == 0)
        #expect(Int(padded.last ?? 0xFF) == row.lastByte)
        #expect(Array(padded.prefix(row.length)) == message)
        #expect(padded.dropFirst(row.length).dropLast().allSatisfy { $0 == 0 })
        #expect(try Crypter.unpad(padded) == message)
    }

    @Test("padding rule for every length 0…600")
    func paddingRule() throws {
        for length in 0...600 {
            let padded = Crypter.pad([UInt8](repeating: 1, count: length))
            #expect(padded.count == (length / 32 + 1) * 32, "length \(length)")
            #expect(Int(padded.last!) == padded.count - length - 1)
            #expect(try Crypter.unpad(padded).count == length)
        }
    }

    @Test("unpad cases", arguments: try file().unpad.indices)
    func unpad(_ index: Int) throws {
        let row = try Self.file().unpad[index]
        if let error = row.expectError {
            let expected = try expectedError(error)
            #expect(throws: expected) { try Crypter.unpad(hex(row.input)) }
        } else {
            #expect(Hex.encode(try Crypter.unpad(hex(row.input))) == row.output)
        }
    }

    /// Chromium does not check that the padding bytes are zero; a count equal to length − 1 leaves nothing.
    @Test func unpadEdges() throws {
        #expect(try Crypter.unpad([0xAA, 0xBB, 0x01]) == [0xAA])
        #expect(try Crypter.unpad([0xAA, 0xBB, 0xCC, 0x01]) == [0xAA, 0xBB])
        #expect(try Crypter.unpad([0x00]) == [])
        #expect(try Crypter.unpad([7, 7, 7, 0x02]) == [7])
        #expect(try Crypter.unpad([7, 7, 7, 0x03]) == [])
        #expect(throws: HybridError(.invalidPadding)) { try Crypter.unpad([7, 7, 7, 0x04]) }
        #expect(throws: HybridError(.invalidPadding)) { try Crypter.unpad([0xFF]) }
        #expect(try Crypter.unpad([UInt8](repeating: 0, count: 255) + [0xFF]) == [])
        #expect(throws: HybridError(.invalidPadding)) { try Crypter.unpad([UInt8](repeating: 0, count: 254) + [0xFF]) }
    }

    @Test("nonce layout: eight zero bytes then the big-endian sequence number", arguments: try file().nonces.map(\.sequence))
    func nonces(_ sequence: UInt32) throws {
        let row = try #require(try Self.file().nonces.first { $0.sequence == sequence })
        #expect(Hex.encode(Crypter.nonceBytes(sequence)) == row.nonce)
    }

    @Test func nonceLayoutExtremes() {
        #expect(Crypter.nonceBytes(HybridConstants.maxSequence) == [0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0xFF, 0xFF, 0xFF])
        #expect(Crypter.nonceBytes(0x0102_0304) == [0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4])
        #expect(HybridConstants.maxSequence == 16_777_215)
    }

    // MARK: - Round trips

    /// Chromium `TEST(CableV2Encoding, MessageEncryption)`: every length 0…529 both ways.
    @Test("round trip of every length 0…529 in both directions")
    func messageEncryption() throws {
        let random = RandomSource.deterministic(seed: Array("CrypterTests.messageEncryption".utf8))
        let k1 = random.bytes(32)
        let k2 = random.bytes(32)
        var a = Crypter(readKey: k2, writeKey: k1)
        var b = Crypter(readKey: k1, writeKey: k2)
        for length in 0..<530 {
            let message = random.bytes(length)
            let ciphertext = try a.encrypt(message)
            #expect(ciphertext.count == (length / 32 + 1) * 32 + 16, "length \(length)")
            #expect(try b.decrypt(ciphertext) == message, "length \(length)")
            let reflected = try b.encrypt(message)
            #expect(try a.decrypt(reflected) == message, "length \(length) reflected")
        }
        #expect(a.writeSequence == 530 && a.readSequence == 530 && b.writeSequence == 530 && b.readSequence == 530)
    }

    @Test("equal plaintexts at different sequence numbers give different ciphertexts")
    func sequenceChangesCiphertext() throws {
        var a = Crypter(readKey: [UInt8](repeating: 2, count: 32), writeKey: [UInt8](repeating: 1, count: 32))
        let first = try a.encrypt([0x01])
        let second = try a.encrypt([0x01])
        #expect(first != second)
        #expect(first.count == second.count)
    }

    // MARK: - Tamper

    static func pair() -> (sender: Crypter, receiver: Crypter) {
        let k1 = [UInt8](repeating: 0x11, count: 32)
        let k2 = [UInt8](repeating: 0x22, count: 32)
        return (Crypter(readKey: k2, writeKey: k1), Crypter(readKey: k1, writeKey: k2))
    }

    @Test("flipping any byte of a ciphertext fails and leaves the sequence number alone")
    func byteFlips() throws {
        var (sender, receiver) = Self.pair()
        let message = Array("0123456789abcdefghijklmnopqrstuvwxyz".utf8)  // 36 bytes → 64 padded → 80 on the wire
        let ciphertext = try sender.encrypt(message)
        #expect(ciphertext.count == 80)
        for index in ciphertext.indices {
            for mask: UInt8 in [0x01, 0x80] {
                #expect(throws: HybridError(.decryptionFailed), "byte \(index) mask \(mask)") {
                    try receiver.decrypt(flipping(ciphertext, at: index, mask: mask))
                }
            }
        }
        #expect(receiver.readSequence == 0)
        #expect(try receiver.decrypt(ciphertext) == message)
    }

    @Test("truncated or extended ciphertexts fail")
    func truncation() throws {
        var (sender, receiver) = Self.pair()
        let ciphertext = try sender.encrypt(Array(repeating: 9, count: 40))
        for count in [0, 1, 15, 16, 17, 31, 47, 48, 63, ciphertext.count - 16, ciphertext.count - 1] {
            #expect(throws: HybridError(.decryptionFailed), "length \(count)") { try receiver.decrypt(Array(ciphertext.prefix(count))) }
        }
        #expect(throws: HybridError(.decryptionFailed)) { try receiver.decrypt(ciphertext + [0]) }
        #expect(throws: HybridError(.decryptionFailed)) { try receiver.decrypt(Array(ciphertext.dropFirst())) }
        #expect(receiver.readSequence == 0)
        #expect(try receiver.decrypt(ciphertext) == Array(repeating: 9, count: 40))
    }

    @Test("a replayed message fails (sequence mismatch)")
    func replay() throws {
        var (sender, receiver) = Self.pair()
        let first = try sender.encrypt([1])
        #expect(try receiver.decrypt(first) == [1])
        #expect(throws: HybridError(.decryptionFailed)) { try receiver.decrypt(first) }
        #expect(receiver.readSequence == 1)
        #expect(try receiver.decrypt(try sender.encrypt([2])) == [2])
    }

    @Test("reordered messages fail until they arrive in order")
    func reorder() throws {
        var (sender, receiver) = Self.pair()
        let first = try sender.encrypt([1])
        let second = try sender.encrypt([2])
        #expect(throws: HybridError(.decryptionFailed)) { try receiver.decrypt(second) }
        #expect(try receiver.decrypt(first) == [1])
        #expect(try receiver.decrypt(second) == [2])
    }

    @Test("the wrong key, or the writer's own key, fails")
    func wrongKey() throws {
        var (sender, _) = Self.pair()
        let ciphertext = try sender.encrypt([1, 2, 3])
        var stranger = Crypter(readKey: [UInt8](repeating: 0x33, count: 32), writeKey: [UInt8](repeating: 0x22, count: 32))
        #expect(throws: HybridError(.decryptionFailed)) { try stranger.decrypt(ciphertext) }
        var mirror = Crypter(readKey: [UInt8](repeating: 0x22, count: 32), writeKey: [UInt8](repeating: 0x11, count: 32))
        #expect(throws: HybridError(.decryptionFailed)) { try mirror.decrypt(ciphertext) }
    }

    /// A message that authenticates but whose padding count exceeds its length (a buggy or hostile
    /// peer) is a padding error, not a decryption error.
    @Test("authentic ciphertext with inconsistent padding is invalidPadding")
    func authenticBadPadding() throws {
        let key = [UInt8](repeating: 0x11, count: 32)
        var receiver = Crypter(readKey: key, writeKey: [UInt8](repeating: 0x22, count: 32))
        var padded = [UInt8](repeating: 0, count: 32)
        padded[31] = 32  // claims 32 zeros before the count byte
        let sealed = try AES.GCM.seal(padded, using: SymmetricKey(data: key), nonce: AES.GCM.Nonce(data: Crypter.nonceBytes(0)))
        #expect(throws: HybridError(.invalidPadding)) { try receiver.decrypt(Array(sealed.ciphertext) + Array(sealed.tag)) }
        #expect(receiver.readSequence == 0)
        // An authentic message whose padding is not zeros is accepted, as in Chromium.
        let junk = [UInt8](repeating: 0x5A, count: 31) + [30]
        let sealedJunk = try AES.GCM.seal(junk, using: SymmetricKey(data: key), nonce: AES.GCM.Nonce(data: Crypter.nonceBytes(0)))
        #expect(try receiver.decrypt(Array(sealedJunk.ciphertext) + Array(sealedJunk.tag)) == [0x5A])
    }

    /// Old-construction messages (nonce = uint32_le(seq) ‖ zeros, AAD 0x02) are not understood.
    @Test func oldConstructionRejected() throws {
        let key = [UInt8](repeating: 0x11, count: 32)
        var receiver = Crypter(readKey: key, writeKey: key)
        let sealed = try AES.GCM.seal(
            Crypter.pad([1]), using: SymmetricKey(data: key), nonce: AES.GCM.Nonce(data: [UInt8](repeating: 0, count: 12)),
            authenticating: [0x02])
        #expect(throws: HybridError(.decryptionFailed)) { try receiver.decrypt(Array(sealed.ciphertext) + Array(sealed.tag)) }
    }

    // MARK: - Sequence limit

    @Test("2^24 − 1 is the last usable sequence number in each direction")
    func sequenceExhausted() throws {
        let k1 = [UInt8](repeating: 0x11, count: 32)
        let k2 = [UInt8](repeating: 0x22, count: 32)
        let last = HybridConstants.maxSequence
        var sender = Crypter(readKey: k2, writeKey: k1, readSequence: 0, writeSequence: last - 1)
        var receiver = Crypter(readKey: k1, writeKey: k2, readSequence: last - 1, writeSequence: 0)
        #expect(try receiver.decrypt(try sender.encrypt([1])) == [1])
        let final = try sender.encrypt([2])
        #expect(sender.writeSequence == last + 1)
        #expect(throws: HybridError(.sequenceExhausted)) { try sender.encrypt([3]) }
        #expect(sender.writeSequence == last + 1)
        #expect(try receiver.decrypt(final) == [2])
        #expect(receiver.readSequence == last + 1)
        #expect(throws: HybridError(.sequenceExhausted)) { try receiver.decrypt(final) }

        // A receiver already past the limit refuses even a well-formed message.
        var beyond = Crypter(readKey: k1, writeKey: k2, readSequence: 1 << 24, writeSequence: 1 << 24)
        #expect(throws: HybridError(.sequenceExhausted)) { try beyond.decrypt(final) }
        #expect(throws: HybridError(.sequenceExhausted)) { try beyond.encrypt([]) }
        var maxed = Crypter(readKey: k1, writeKey: k2, readSequence: .max, writeSequence: .max)
        #expect(throws: HybridError(.sequenceExhausted)) { try maxed.encrypt([]) }
        #expect(throws: HybridError(.sequenceExhausted)) { try maxed.decrypt(final) }
    }

    @Test("ClientSession.encryptedSize(ofRequest:) is the length encryptRequest produces, across the padding boundaries")
    func encryptedSizeMatchesEncryption() throws {
        let key = [UInt8](repeating: 7, count: 32)
        var crypter = Crypter(readKey: key, writeKey: key)
        for count in Array(0...130) + [65_470, 65_471, 65_503, 65_504, 111_152] {
            let request = [UInt8](repeating: 0xA5, count: count)
            let encrypted = try crypter.encrypt(Frame(type: .ctap, payload: request).bytes)
            #expect(ClientSession.encryptedSize(ofRequest: request) == encrypted.count, "request of \(count) bytes")
        }
    }
}
