import CTAP2
import HybridCore
import HybridTestSupport
import Testing

/// `Frame` and `MessageType` against `Vectors/framing.json` (PROTOCOL.md §8.1).
@Suite struct FrameTests {
    struct Vector: Decodable, Sendable, CustomTestStringConvertible {
        let name: String
        let bytes: String
        let type: UInt8?
        let payload: String?
        let expectError: String?
        var testDescription: String { name }
    }
    struct MessageTypes: Decodable {
        let kShutdown, kCTAP, kUpdate, kJSON: UInt8
    }
    struct File: Decodable {
        let vectors: [Vector]
        let messageTypes: MessageTypes
    }

    static func file() throws -> File { try Vectors.load("framing", as: File.self) }

    @Test("frames parse to their type and payload and serialize back", arguments: try file().vectors.filter { $0.expectError == nil })
    func parses(_ vector: Vector) throws {
        let frame = try Frame(bytes: hex(vector.bytes))
        #expect(frame.type.rawValue == vector.type)
        #expect(Hex.encode(frame.payload) == vector.payload)
        #expect(Hex.encode(frame.bytes) == vector.bytes)
        let rawType = try #require(vector.type)
        let payload = try #require(vector.payload)
        let built = Frame(type: try #require(MessageType(rawValue: rawType)), payload: hex(payload))
        #expect(built == frame)
    }

    @Test("rejected frames", arguments: try file().vectors.filter { $0.expectError != nil })
    func rejects(_ vector: Vector) throws {
        let expected = try expectedError(vector.expectError)
        #expect(throws: expected) { try Frame(bytes: hex(vector.bytes)) }
    }

    @Test func messageTypeValues() throws {
        let types = try Self.file().messageTypes
        #expect(MessageType.shutdown.rawValue == types.kShutdown)
        #expect(MessageType.ctap.rawValue == types.kCTAP)
        #expect(MessageType.update.rawValue == types.kUpdate)
        #expect(MessageType.json.rawValue == types.kJSON)
        #expect(MessageType.allCases.count == 4)
    }

    @Test("every type byte: 0…3 parse, 4…255 are rejected")
    func everyTypeByte() throws {
        for byte in 0...255 {
            let bytes = [UInt8(byte), 0xAB]
            if byte <= 3 {
                let frame = try Frame(bytes: bytes)
                #expect(frame.type.rawValue == UInt8(byte))
                #expect(frame.payload == [0xAB])
            } else {
                #expect(throws: HybridError(.invalidFrame), "type \(byte)") { try Frame(bytes: bytes) }
            }
        }
    }

    @Test func emptyMessageRejected() {
        #expect(throws: HybridError(.invalidFrame)) { try Frame(bytes: []) }
    }

    @Test func shutdownIsOneZeroByte() throws {
        #expect(Frame.shutdown.bytes == [0x00])
        #expect(try Frame(bytes: [0x00]) == .shutdown)
        #expect(try Frame(bytes: [0x01]).payload.isEmpty)
    }

    /// The transcript's CTAP frames: the type byte then the command or status byte.
    @Test func transcriptCTAPFrames() throws {
        let messages = try TranscriptQRInputs.load().post_handshake.messages
        let request = try #require(messages.first { $0.label.hasPrefix("CTAP getAssertion request") })
        let frame = try Frame(bytes: hex(request.plaintext))
        #expect(frame.type == .ctap)
        #expect(frame.payload.first == 0x02)  // authenticatorGetAssertion
        let response = try #require(messages.first { $0.label.hasPrefix("CTAP getAssertion response") })
        let reply = try Frame(bytes: hex(response.plaintext))
        #expect(reply.type == .ctap)
        #expect(reply.payload.first == 0x00)  // CTAP2_OK
    }
}

/// `UpdateMessage` against the transcripts (PROTOCOL.md §8.3).
@Suite struct UpdateMessageTests {
    static func linkingInfo() throws -> LinkingInfo {
        let l = try LinkedTranscriptInputs.load().linking_info_in_qr_flow
        return LinkingInfo(
            contactID: hex(l.contact_id), pairingID: hex(l.pairing_id_8), linkSecret: hex(l.paired_secret),
            authenticatorPublicKey: hex(l.phone_identity_public_x962), name: l.authenticator_name,
            handshakeSignature: hex(l.pairing_signature))
    }

    @Test("the padding-only update equals transcript_qr_flow's update plaintext and pads to 512")
    func paddingOnly() throws {
        let t = try TranscriptQRInputs.load()
        let message = t.post_handshake.messages[1]
        #expect(message.label.hasPrefix("update message"))
        let frame = UpdateMessage.frame(linking: nil)
        #expect(Hex.encode(frame.bytes) == message.plaintext)
        #expect(frame.type == .update)
        #expect(Crypter.pad(frame.bytes).count == 512)
        #expect(Hex.encode(Crypter.pad(frame.bytes)) == message.padded_plaintext)
        // The phone's second message (sequence 1) under k2 is 528 bytes on the wire.
        var phone = Crypter(
            readKey: hex(t.noise.k1_desktop_write_phone_read), writeKey: hex(t.noise.k2_phone_write_desktop_read),
            readSequence: 0, writeSequence: message.sequence_number)
        let ciphertext = try phone.encrypt(frame.bytes)
        #expect(ciphertext.count == 528)
        #expect(Hex.encode(ciphertext) == message.ciphertext)
        #expect(try UpdateMessage.parse(payload: frame.payload) == nil)
    }

    @Test("the linking update equals transcript_linked_flow's update plaintext and pads to 512")
    func withLinking() throws {
        let l = try LinkedTranscriptInputs.load().linking_info_in_qr_flow
        let t = try TranscriptQRInputs.load()
        let info = try Self.linkingInfo()
        let frame = UpdateMessage.frame(linking: info)
        #expect(Hex.encode(frame.bytes) == l.update_plaintext)
        #expect(frame.bytes.count == l.update_plaintext_len)
        #expect(Crypter.pad(frame.bytes).count == l.padded_len)
        // Padding formula: 512 − 16 − 1 − 3 − len(CBOR{1: linking}).
        let linkingLength = CBOR.encode([1: info.cbor]).count
        #expect(512 - 16 - 1 - 3 - linkingLength == l.padding_length)
        var phone = Crypter(
            readKey: hex(t.noise.k1_desktop_write_phone_read), writeKey: hex(t.noise.k2_phone_write_desktop_read),
            readSequence: 0, writeSequence: 1)
        let ciphertext = try phone.encrypt(frame.bytes)
        #expect(ciphertext.count == l.ciphertext_len)
        #expect(Hex.encode(ciphertext) == l.ciphertext_seq1_with_k2)

        let parsed = try #require(try UpdateMessage.parse(payload: frame.payload))
        #expect(try LinkingInfo(cbor: parsed) == info)
    }

    @Test("update ciphertexts are 528 bytes whatever the name length")
    func constantSize() throws {
        var info = try Self.linkingInfo()
        for length in [0, 1, 20, 100, 200] {
            info.name = String(repeating: "n", count: length)
            let frame = UpdateMessage.frame(linking: info)
            #expect(Crypter.pad(frame.bytes).count == 512, "name length \(length)")
        }
    }

    @Test("update payloads a Chromium desktop rejects")
    func parseRejections() throws {
        #expect(throws: HybridError(.invalidFrame)) { try UpdateMessage.parse(payload: []) }
        #expect(throws: HybridError(.invalidFrame)) { try UpdateMessage.parse(payload: [0xFF]) }
        #expect(throws: HybridError(.invalidFrame)) { try UpdateMessage.parse(payload: CBOR.encode([1, 2])) }
        #expect(throws: HybridError(.invalidFrame)) { try UpdateMessage.parse(payload: CBOR.encode(.bytes([0]))) }
        #expect(throws: HybridError(.invalidFrame)) { try UpdateMessage.parse(payload: CBOR.encode([0: .bytes([0])]) + [0]) }
        #expect(throws: HybridError(.invalidLinkingInfo)) { try UpdateMessage.parse(payload: CBOR.encode([1: .bytes([1])])) }
        #expect(throws: HybridError(.invalidLinkingInfo)) { try UpdateMessage.parse(payload: CBOR.encode([1: [1, 2]])) }
        // Other keys (padding, unknown) are not looked at; key 1 must only be a map here.
        #expect(try UpdateMessage.parse(payload: CBOR.encode([:])) == nil)
        #expect(try UpdateMessage.parse(payload: CBOR.encode([0: "x", 7: 7])) == nil)
        #expect(try UpdateMessage.parse(payload: CBOR.encode([1: [:]])) == .map([:]))
    }
}
