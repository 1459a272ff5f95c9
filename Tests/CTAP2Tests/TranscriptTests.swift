import CTAP2
import Crypto
import HybridTestSupport
import Testing

/// The getAssertion exchange of the QR-flow transcript (`transcript_qr_flow.json`
/// `post_handshake.getassertion_extra`), checked field by field as client and relying party would.
@Suite("Transcript getAssertion")
struct TranscriptTests {
    @Test("the request decodes into its fields and re-encodes byte-exact")
    func request() throws {
        let vector = try CTAP2Case.named("transcript_getassertion_request")
        let request = try GetAssertionRequest(bytes: vector.bytes)
        #expect(request.rpId == vector.field("rpId"))
        #expect(request.clientDataHash == vector.bytes("clientDataHash"))
        #expect(request.allowList == [PublicKeyCredentialDescriptor(id: vector.bytes("allowListId"))])
        #expect(request.options == AuthenticatorOptions(uv: true))
        #expect(request.extensions == nil)
        #expect(request.encode() == vector.bytes)

        // Rebuilt from scratch, as the desktop would.
        let built = GetAssertionRequest(
            rpId: "example.com", clientDataHash: vector.bytes("clientDataHash"),
            allowList: [PublicKeyCredentialDescriptor(id: vector.bytes("allowListId"))],
            options: AuthenticatorOptions(uv: true))
        #expect(built.encode() == vector.bytes)
        #expect(CTAP2Request.getAssertion(built).encode() == [0x02] + vector.bytes)
    }

    @Test("the response decodes into its fields and re-encodes byte-exact")
    func response() throws {
        let vector = try CTAP2Case.named("transcript_getassertion_response")
        let response = try GetAssertionResponse(bytes: vector.bytes)
        let credential = try #require(response.credential)
        #expect(credential.type == "public-key")
        #expect(credential.id == vector.bytes("credentialId"))
        #expect(credential.transports == vector.list("transports"))
        #expect(response.authData.bytes == vector.bytes("authData"))
        #expect(response.signature == vector.bytes("signature"))
        #expect(response.user == nil && response.numberOfCredentials == nil && response.userSelected == nil)
        #expect(response.encode() == vector.bytes)

        let wrapped = try CTAP2Response(bytes: [0x00] + vector.bytes)
        #expect(try wrapped.decodePayload(as: GetAssertionResponse.self) == response)
    }

    @Test("clientDataJSON is reproduced byte-exact and hashes to clientDataHash")
    func clientData() throws {
        let vector = try CTAP2Case.named("transcript_client_data")
        let parsed = try CollectedClientData(json: vector.bytes)
        #expect(parsed.type == .get)
        #expect(parsed.challenge == vector.bytes("challenge"))
        #expect(parsed.origin == vector.field("origin"))
        #expect(parsed.crossOrigin == false)
        #expect(parsed.topOrigin == nil)

        let built = CollectedClientData(type: .get, challenge: Array(0..<16), origin: "https://example.com")
        #expect(built.json == vector.bytes)
        #expect(built.hash == vector.bytes("hash"))
        #expect(CollectedClientData.hash(ofJSON: vector.bytes) == vector.bytes("hash"))
        #expect(built.hash == (try CTAP2Case.named("transcript_getassertion_request")).bytes("clientDataHash"))
    }

    @Test("authenticator data: rpIdHash of example.com, UP|UV, counter 0")
    func authenticatorData() throws {
        let vector = try CTAP2Case.named("transcript_authenticator_data")
        let authData = try AuthenticatorData(bytes: vector.bytes)
        #expect(authData.rpIdHash == vector.bytes("rpIdHash"))
        #expect(authData.rpIdHash == AuthenticatorData.rpIdHash(for: "example.com"))
        #expect(authData.flags == [.userPresent, .userVerified])
        #expect(authData.flags.rawValue == vector.bytes("flags")[0])
        #expect(authData.userPresent && authData.userVerified)
        #expect(authData.signCount == 0)
        #expect(authData.attestedCredentialData == nil && authData.extensions == nil)
        #expect(authData.bytes == vector.bytes)
        let built = AuthenticatorData(rpId: "example.com", flags: [.userPresent, .userVerified], signCount: 0)
        #expect(built == authData)
    }

    @Test("the DER signature verifies over authData ‖ clientDataHash with the credential key")
    func signatureVerifies() throws {
        let (signature, authData, hash, key) = try signatureParts()
        try ES256.verify(signature: signature, authenticatorData: authData, clientDataHash: hash, publicKey: key)
        let response = try GetAssertionResponse(bytes: try CTAP2Case.named("transcript_getassertion_response").bytes)
        try response.verifySignature(clientDataHash: hash, publicKey: key)
    }

    @Test("flipping one bit of the signature, authData or hash fails with invalidSignature")
    func tamperedSignatureFails() throws {
        let (signature, authData, hash, key) = try signatureParts()
        for index in signature.indices {
            var tampered = signature
            tampered[index] ^= 0x01
            #expect(throws: CTAP2Error(.invalidSignature), "signature byte \(index)") {
                try ES256.verify(signature: tampered, authenticatorData: authData, clientDataHash: hash, publicKey: key)
            }
        }
        for index in authData.indices {
            var tampered = authData
            tampered[index] ^= 0x80
            #expect(throws: CTAP2Error(.invalidSignature), "authData byte \(index)") {
                try ES256.verify(signature: signature, authenticatorData: tampered, clientDataHash: hash, publicKey: key)
            }
        }
        for index in hash.indices {
            var tampered = hash
            tampered[index] ^= 0x01
            #expect(throws: CTAP2Error(.invalidSignature), "hash byte \(index)") {
                try ES256.verify(signature: signature, authenticatorData: authData, clientDataHash: tampered, publicKey: key)
            }
        }
    }

    @Test("the signature does not verify under another key")
    func wrongKey() throws {
        let (signature, authData, hash, _) = try signatureParts()
        let other = COSEKey(publicKey: P256.Signing.PrivateKey().publicKey)
        #expect(throws: CTAP2Error(.invalidSignature)) {
            try ES256.verify(signature: signature, authenticatorData: authData, clientDataHash: hash, publicKey: other)
        }
    }

    @Test("the credential COSE key vector is the transcript credential public key")
    func coseKey() throws {
        let vector = try CTAP2Case.named("transcript_credential_cose_key")
        let key = try COSEKey(bytes: vector.bytes)
        #expect(key.x963Representation == vector.bytes("publicKey"))
        #expect(key.encode() == vector.bytes)
    }

    private func signatureParts() throws -> (signature: [UInt8], authData: [UInt8], hash: [UInt8], key: COSEKey) {
        let vector = try CTAP2Case.named("transcript_assertion_signature")
        let key = try COSEKey(x963Representation: vector.bytes("publicKey"))
        return (vector.bytes, vector.bytes("authData"), vector.bytes("clientDataHash"), key)
    }
}
