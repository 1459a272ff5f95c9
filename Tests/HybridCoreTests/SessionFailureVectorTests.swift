import CTAP2
import Crypto
import HybridCore
import HybridTestSupport
import Testing

/// `Vectors/session_failures.json`: the transcripts' handshake messages, transport messages and
/// linking map, each changed in one stated way, refused with the listed `HybridError` code by the
/// step that reads them (PROTOCOL.md §5–§8); the control case of each kind, unchanged, succeeds
/// and gives the transcript's values.
@Suite struct SessionFailureVectorTests {
    struct Vector: Decodable, Sendable, CustomTestStringConvertible {
        let name, kind: String
        let expectError: String?
        let pattern, psk, message, response, handshakeHash: String?
        let desktopIdentityPublic, desktopIdentityPrivate, desktopEphemeralPrivate: String?
        let phoneIdentityPublic, phoneIdentityPrivate, phoneEphemeralPrivate: String?
        let readKey, ciphertext, plaintext, linkingMap: String?
        let sequence: UInt32?
        let type: UInt8?
        var testDescription: String { name }
    }

    static let vectors: [Vector] = (try? Vectors.load("session_failures", as: VectorFile<Vector>.self).vectors) ?? []

    /// A field the vector's kind requires.
    static func field(_ value: String?, _ name: String, in vector: Vector) throws -> String {
        try #require(value, "\(vector.name): no \(name)")
    }

    /// Runs the step `vector.kind` names and returns the values a control case states.
    static func perform(_ v: Vector) throws -> [String: String] {
        switch v.kind {
        case "handshakeMessage1":
            let psk = hex(try field(v.psk, "psk", in: v))
            let message = hex(try field(v.message, "message", in: v))
            let ephemeral = try p256PrivateKey(try field(v.phoneEphemeralPrivate, "phoneEphemeralPrivate", in: v))
            let answer: (result: NoiseHandshake.Result, response: [UInt8])
            if v.pattern == "KNpsk0" {
                let desktop = try P256.KeyAgreement.PublicKey(
                    x963Representation: hex(try field(v.desktopIdentityPublic, "desktopIdentityPublic", in: v)))
                answer = try NoiseHandshake.respondQR(to: message, psk: psk, peerIdentity: desktop, ephemeralKey: ephemeral)
            } else {
                #expect(v.pattern == "NKpsk0")
                let identity = try p256PrivateKey(try field(v.phoneIdentityPrivate, "phoneIdentityPrivate", in: v))
                answer = try NoiseHandshake.respondLinked(to: message, psk: psk, identityKey: identity, ephemeralKey: ephemeral)
            }
            return ["response": Hex.encode(answer.response), "handshakeHash": Hex.encode(answer.result.handshakeHash)]
        case "handshakeMessage2":
            let psk = hex(try field(v.psk, "psk", in: v))
            let ephemeral = try p256PrivateKey(try field(v.desktopEphemeralPrivate, "desktopEphemeralPrivate", in: v))
            let initiator: NoiseHandshake.Initiator
            if v.pattern == "KNpsk0" {
                let identity = try p256PrivateKey(try field(v.desktopIdentityPrivate, "desktopIdentityPrivate", in: v))
                initiator = .qr(psk: psk, identityKey: identity, ephemeralKey: ephemeral)
            } else {
                #expect(v.pattern == "NKpsk0")
                let phone = try P256.KeyAgreement.PublicKey(
                    x963Representation: hex(try field(v.phoneIdentityPublic, "phoneIdentityPublic", in: v)))
                initiator = .linked(psk: psk, peerIdentity: phone, ephemeralKey: ephemeral)
            }
            let result = try initiator.finish(response: hex(try field(v.message, "message", in: v)))
            return ["handshakeHash": Hex.encode(result.handshakeHash)]
        case "transport", "postHandshakeMessage", "frame":
            let plaintext = try decrypt(v)
            var values = ["plaintext": Hex.encode(plaintext)]
            if v.kind == "postHandshakeMessage" {
                _ = try PostHandshakeMessage.parse(plaintext)
            } else if v.kind == "frame" {
                values["type"] = String(try Frame(bytes: plaintext).type.rawValue)
            }
            return values
        case "linkingMap":
            let info = try LinkingInfo(cbor: CBOR.decode(hex(try field(v.linkingMap, "linkingMap", in: v))))
            try info.verify(
                clientIdentity: try p256PrivateKey(try field(v.desktopIdentityPrivate, "desktopIdentityPrivate", in: v)),
                handshakeHash: hex(try field(v.handshakeHash, "handshakeHash", in: v)))
            return [:]
        default:
            Issue.record("\(v.name): unknown kind \(v.kind)")
            return [:]
        }
    }

    /// The Crypter step: `ciphertext` read with `readKey` at read sequence `sequence`.
    static func decrypt(_ v: Vector) throws -> [UInt8] {
        var crypter = Crypter(
            readKey: hex(try field(v.readKey, "readKey", in: v)), writeKey: [UInt8](repeating: 0, count: 32),
            readSequence: try #require(v.sequence, "\(v.name): no sequence"), writeSequence: 0)
        return try crypter.decrypt(hex(try field(v.ciphertext, "ciphertext", in: v)))
    }

    @Test("the file has a control case and a negative case of every kind")
    func shape() {
        let kinds = ["handshakeMessage1", "handshakeMessage2", "transport", "postHandshakeMessage", "frame", "linkingMap"]
        #expect(Set(Self.vectors.map(\.kind)) == Set(kinds))
        for kind in kinds {
            #expect(Self.vectors.contains { $0.kind == kind && $0.expectError == nil }, "\(kind): no control case")
            #expect(Self.vectors.contains { $0.kind == kind && $0.expectError != nil }, "\(kind): no negative case")
        }
    }

    @Test("control cases succeed with the values they state", arguments: vectors.filter { $0.expectError == nil })
    func control(_ v: Vector) throws {
        let values = try Self.perform(v)
        let stated = ["response": v.response, "handshakeHash": v.kind == "linkingMap" ? nil : v.handshakeHash,
                      "plaintext": v.plaintext, "type": v.type.map { String($0) }]
        for (key, value) in stated {
            guard let value else { continue }
            #expect(values[key] == value, "\(key)")
        }
    }

    @Test("each changed input is refused with its code", arguments: vectors.filter { $0.expectError != nil })
    func refused(_ v: Vector) throws {
        let expected = try expectedError(v.expectError)
        // A message the rule refuses after decryption must decrypt to the plaintext it states, so that
        // the refusal is the rule's and not the Crypter's.
        if v.kind != "transport", let plaintext = v.plaintext {
            #expect(Hex.encode(try Self.decrypt(v)) == plaintext)
        }
        do {
            let values = try Self.perform(v)
            Issue.record("accepted: \(values)")
        } catch let error as HybridError {
            #expect(error.code == expected.code, "\(error.reason)")
        }
    }
}
