import CTAP2
import Crypto
import HybridTestSupport
import Testing

/// "none" and "packed" self attestation: built with fresh keys, sent as bytes, verified, tampered.
@Suite("Attestation")
struct AttestationTests {
    @Test("none: build, encode, decode, verify")
    func noneRoundTrip() throws {
        let credential = TestCredential()
        let response = MakeCredentialResponse.none(authData: try credential.authData())
        #expect(response.fmt == "none" && response.attStmt.isEmpty)
        let decoded = try MakeCredentialResponse(bytes: response.encode())
        #expect(decoded == response)
        #expect(try decoded.verifyAttestation(clientDataHash: credential.clientData.hash) == AttestationType.none)
        #expect(try decoded.attestationStatement() == AttestationStatement.none)
        #expect(try decoded.authData.attestedCredentialData?.coseKey() == credential.coseKey)
    }

    @Test("packed self: build, encode, decode, verify")
    func packedRoundTrip() throws {
        let credential = TestCredential()
        let hash = credential.clientData.hash
        let response = try MakeCredentialResponse.packedSelf(
            authData: try credential.authData(), clientDataHash: hash, privateKey: credential.privateKey)
        #expect(response.fmt == "packed")
        #expect(response.attStmt["alg"] == -7)
        let decoded = try MakeCredentialResponse(bytes: response.encode())
        #expect(decoded == response)
        #expect(try decoded.verifyAttestation(clientDataHash: hash) == .selfAttestation)
        guard case .packed(let alg, let sig, let x5c) = try decoded.attestationStatement() else {
            Issue.record("not packed")
            return
        }
        #expect(alg == .es256 && x5c == nil)
        try ES256.verify(
            signature: sig, authenticatorData: decoded.authData.bytes, clientDataHash: hash, publicKey: credential.coseKey)
    }

    @Test("packed self response with Chromium-style unsigned extension outputs round-trips")
    func unsignedExtensionOutputs() throws {
        let credential = TestCredential()
        var response = try MakeCredentialResponse.packedSelf(
            authData: try credential.authData(extensions: ["credProtect": 2]),
            clientDataHash: credential.clientData.hash, privateKey: credential.privateKey)
        response.unsignedExtensionOutputs = ["prf": ["enabled": true]]
        response.epAtt = false
        response.largeBlobKey = Array(repeating: 1, count: 32)
        let decoded = try MakeCredentialResponse(bytes: response.encode())
        #expect(decoded == response)
        #expect(decoded.authData.extensions == ["credProtect": 2])
        #expect(try decoded.verifyAttestation(clientDataHash: credential.clientData.hash) == .selfAttestation)
    }

    @Test("the COMPUTED packed and none vectors verify")
    func vectors() throws {
        for name in ["packed_self_makecredential_response", "none_makecredential_response_with_prf"] {
            let vector = try CTAP2Case.named(name)
            let response = try MakeCredentialResponse(bytes: vector.bytes)
            #expect(response.fmt == vector.field("fmt"))
            #expect(response.authData.bytes == vector.bytes("authData"))
            let type = try response.verifyAttestation(clientDataHash: vector.bytes("clientDataHash"))
            #expect(type.rawValue == vector.field("attestation"))
        }
    }

    @Test("packed self: flipping any signature, authData or hash byte fails verification")
    func packedTamper() throws {
        let credential = TestCredential()
        let hash = credential.clientData.hash
        let response = try MakeCredentialResponse.packedSelf(
            authData: try credential.authData(), clientDataHash: hash, privateKey: credential.privateKey)
        guard case .bytes(let sig)? = response.attStmt["sig"] else {
            Issue.record("no sig")
            return
        }
        for index in sig.indices {
            var tampered = response
            var bad = sig
            bad[index] ^= 0x04
            tampered.attStmt["sig"] = .bytes(bad)
            #expect(throws: CTAP2Error(.invalidSignature)) { try tampered.verifyAttestation(clientDataHash: hash) }
        }
        for index in hash.indices {
            var bad = hash
            bad[index] ^= 0x01
            #expect(throws: CTAP2Error(.invalidSignature)) { try response.verifyAttestation(clientDataHash: bad) }
        }
        // authData bytes: flip each byte of the signed bytes that still parse; the signature must fail.
        let signed = response.authData.bytes
        var signatureFailures = 0
        for index in signed.indices {
            var bad = signed
            bad[index] ^= 0x01
            guard let authData = try? AuthenticatorData(bytes: bad), authData.attestedCredentialData != nil else { continue }
            var tampered = response
            tampered.authData = authData
            do {
                try tampered.verifyAttestation(clientDataHash: hash)
                Issue.record("tampered authData byte \(index) verified")
            } catch {
                // A flip inside the COSE key may break the key itself (kty, alg, crv, point);
                // anywhere else the signature must fail.
                if error.code == .invalidSignature { signatureFailures += 1 }
            }
        }
        // rpIdHash (32), flags, counter (4), AAGUID (16) and credential ID (16) flips reach the
        // signature check; x/y flips mostly leave the curve (invalidPublicKey).
        #expect(signatureFailures >= 60)
    }

    @Test("packed with an x5c that is no certificate is invalid; ECDAA, other alg and unknown fmt are unsupported")
    func unsupported() throws {
        let credential = TestCredential()
        let hash = credential.clientData.hash
        var response = try MakeCredentialResponse.packedSelf(
            authData: try credential.authData(), clientDataHash: hash, privateKey: credential.privateKey)
        var withChain = response
        withChain.attStmt["x5c"] = [.bytes([0x30, 0x00])]
        #expect(throws: CTAP2Error(.invalidAttestation)) { try withChain.verifyAttestation(clientDataHash: hash) }
        var ecdaa = response
        ecdaa.attStmt["ecdaaKeyId"] = .bytes([1])
        #expect(throws: CTAP2Error(.unsupportedAttestation)) { try ecdaa.verifyAttestation(clientDataHash: hash) }
        var rs256 = response
        rs256.attStmt["alg"] = -257
        #expect(throws: CTAP2Error(.unsupportedAlgorithm)) { try rs256.verifyAttestation(clientDataHash: hash) }
        response.fmt = "android-safetynet"
        #expect(throws: CTAP2Error(.unsupportedAttestation)) { try response.verifyAttestation(clientDataHash: hash) }
    }

    @Test("malformed packed statements: missing sig, sig as text, none with entries")
    func malformed() throws {
        let credential = TestCredential()
        let hash = credential.clientData.hash
        let packed = try MakeCredentialResponse.packedSelf(
            authData: try credential.authData(), clientDataHash: hash, privateKey: credential.privateKey)
        var noSig = packed
        noSig.attStmt["sig"] = nil
        #expect(throws: CTAP2Error(.missingField)) { try noSig.verifyAttestation(clientDataHash: hash) }
        var textSig = packed
        textSig.attStmt["sig"] = "MEUCIQ"
        #expect(throws: CTAP2Error(.wrongType)) { try textSig.verifyAttestation(clientDataHash: hash) }
        var none = MakeCredentialResponse.none(authData: try credential.authData())
        none.attStmt = ["sig": .bytes([1])]
        #expect(throws: CTAP2Error(.invalidAttestation)) { try none.verifyAttestation(clientDataHash: hash) }
    }

    @Test("building packed self attestation with the wrong key is refused")
    func wrongKeyRefused() throws {
        let credential = TestCredential()
        #expect(throws: CTAP2Error(.invalidAttestation)) {
            try MakeCredentialResponse.packedSelf(
                authData: try credential.authData(), clientDataHash: credential.clientData.hash,
                privateKey: P256.Signing.PrivateKey())
        }
        let noCredential = AuthenticatorData(rpId: "example.com", flags: .userPresent, signCount: 0)
        #expect(throws: CTAP2Error(.missingField)) {
            try MakeCredentialResponse.packedSelf(
                authData: noCredential, clientDataHash: credential.clientData.hash, privateKey: credential.privateKey)
        }
    }

    @Test("getAssertion round trip: phone signs, relying party verifies with the registered key")
    func assertionRoundTrip() throws {
        let credential = TestCredential()
        let clientData = CollectedClientData(type: .get, challenge: [1, 2, 3], origin: "https://example.com")
        let authData = AuthenticatorData(rpId: credential.rpId, flags: [.userPresent, .userVerified], signCount: 5)
        let signature = try ES256.sign(
            authenticatorData: authData.bytes, clientDataHash: clientData.hash, with: credential.privateKey)
        let response = GetAssertionResponse(
            credential: PublicKeyCredentialDescriptor(id: credential.credentialId, transports: ["internal", "cable"]),
            authData: authData, signature: signature,
            user: PublicKeyCredentialUserEntity(id: [7], name: "", displayName: ""), userSelected: true,
            unsignedExtensionOutputs: ["prf": ["results": ["first": .bytes(Array(repeating: 3, count: 32))]]])
        let wire = CTAP2Response(response).encode()
        let received = try CTAP2Response(bytes: wire).decodePayload(as: GetAssertionResponse.self)
        #expect(received == response)
        try received.verifySignature(clientDataHash: clientData.hash, publicKey: credential.coseKey)
        #expect(received.authData.signCount == 5)
        #expect(throws: CTAP2Error(.invalidSignature)) {
            try received.verifySignature(clientDataHash: credential.clientData.hash, publicKey: credential.coseKey)
        }
    }

    @Test("a raw r ‖ s signature (64 bytes) is refused naming the likely mistake; other non-DER bytes are not guessed at")
    func rawSignatureNamed() throws {
        let credential = TestCredential()
        let message = Array("authData ‖ clientDataHash".utf8)
        let raw = Array(try credential.privateKey.signature(for: message).rawRepresentation)
        #expect(raw.count == 64)
        let key = credential.privateKey.publicKey
        for (signature, hinted) in [(raw, raw.first != 0x30), (Array(repeating: 0xAB, count: 63), false)] {
            do {
                try ES256.verify(signature: signature, over: message, publicKey: key)
                Issue.record("a non-DER signature verified")
            } catch {
                #expect(error.code == .invalidSignature)
                #expect(error.reason.hasPrefix("ES256 signature is not a DER ECDSA-Sig-Value"), "\(error.reason)")
                #expect(error.reason.contains("a raw r ‖ s?") == hinted, "\(error.reason)")
            }
        }
    }
}
