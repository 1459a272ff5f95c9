import CTAP2
import Foundation
import HybridCore
import HybridRuntime
import HybridSim
import HybridTestSupport
import Testing

/// The relying party with packed full attestation (`x5c`): the verdict it returns, trust anchors,
/// and py_webauthn, an independent verifier, accepting the same response with the same root.
@Suite("Relying party: packed full attestation (x5c)")
struct RelyingPartyFullAttestationTests {
    /// A real registration from the phone's authenticator, its statement replaced by full
    /// attestation with `pki`'s key and certificate (authData carries the certificate's AAGUID).
    static func fullAttestation(
        _ pki: TestAttestationPKI, leaf: TestAttestationPKI.Leaf = .init()
    ) throws -> CeremonyFixture.Registration {
        var fixture = CeremonyFixture()
        var registration = try fixture.register(attestation: .none)
        let authData = registration.response.authData
        let attested = try #require(authData.attestedCredentialData)
        let withAAGUID = try AuthenticatorData(
            rpIdHash: authData.rpIdHash, flags: authData.flags, signCount: authData.signCount,
            attestedCredentialData: try AttestedCredentialData(
                aaguid: TestAttestationPKI.aaguid, credentialId: attested.credentialId,
                credentialPublicKeyBytes: attested.credentialPublicKey),
            extensions: authData.extensions)
        registration.response = try MakeCredentialResponse.packedFull(
            authData: withAAGUID, clientDataHash: CollectedClientData.hash(ofJSON: registration.clientDataJSON),
            attestationKey: pki.attestationKey, x5c: [TestAttestationPKI.der(pki.leaf(leaf))])
        return registration
    }

    static func verify(
        _ registration: CeremonyFixture.Registration, anchors: AttestationTrustAnchors? = nil,
        allowed: Set<AttestationType> = [.none, .selfAttestation, .basic], now: UInt64 = TestAttestationPKI.nowSeconds
    ) throws -> VerifiedRegistration {
        var rp = CeremonyFixture.relyingParty()
        rp.attestationTrustAnchors = anchors
        return try rp.verifiedRegistration(
            response: registration.response, clientDataJSON: registration.clientDataJSON,
            expectedChallenge: registration.challenge, user: CeremonyFixture.user, allowedAttestation: allowed, now: now)
    }

    @Test("accepted as basic: trust not established without roots, anchored with the root; the record keeps fmt packed")
    func accepted() throws {
        let pki = TestAttestationPKI()
        let registration = try Self.fullAttestation(pki)
        let unanchored = try Self.verify(registration)
        #expect(unanchored.attestation.type == .basic)
        #expect(unanchored.attestation.trust == .notEstablished)
        #expect(unanchored.credential.attestationFormat == "packed")
        let anchored = try Self.verify(registration, anchors: try AttestationTrustAnchors(pem: pki.rootPEM))
        #expect(anchored.attestation.isTrusted)
        #expect(anchored.credential == unanchored.credential)
        // The record-only entry point gives the same record.
        var rp = CeremonyFixture.relyingParty()
        rp.attestationTrustAnchors = try AttestationTrustAnchors(pem: pki.rootPEM)
        #expect(
            try rp.verifyRegistration(
                response: registration.response, clientDataJSON: registration.clientDataJSON,
                expectedChallenge: registration.challenge, user: CeremonyFixture.user,
                now: TestAttestationPKI.nowSeconds) == anchored.credential)
    }

    @Test("refusals: another root, an expired leaf (with roots), a §8.2.1 break, basic not allowed")
    func refusals() throws {
        let pki = TestAttestationPKI()
        let registration = try Self.fullAttestation(pki)
        let stranger = try AttestationTrustAnchors(pem: TestAttestationPKI().rootPEM)
        #expect(throws: RelyingPartyError(.untrustedAttestation)) { _ = try Self.verify(registration, anchors: stranger) }
        // The relying party's clock (now, seconds) is the validity time: two years on, all expired.
        #expect(throws: RelyingPartyError(.untrustedAttestation)) {
            _ = try Self.verify(
                registration, anchors: try AttestationTrustAnchors(pem: pki.rootPEM),
                now: TestAttestationPKI.nowSeconds + 2 * 365 * 86_400)
        }
        var wrongOU = TestAttestationPKI.Leaf()
        wrongOU.organizationalUnit = "Sales"
        do {
            _ = try Self.verify(try Self.fullAttestation(pki, leaf: wrongOU))
            Issue.record("a wrong OU was accepted")
        } catch let error as RelyingPartyError {
            #expect(error.code == .invalidAttestation)
            #expect(error.description.contains("Subject-OU must be \"Authenticator Attestation\", is [\"Sales\"]"), "\(error)")
        }
        #expect(throws: RelyingPartyError(.attestationNotAllowed)) {
            _ = try Self.verify(registration, allowed: [.none, .selfAttestation])
        }
        // The record-only entry point cannot say that trust was not established: without anchors it
        // refuses the chain (it refused every x5c before), where verifiedRegistration returns it.
        let error = #expect(throws: RelyingPartyError.self) {
            _ = try CeremonyFixture.relyingParty().verifyRegistration(
                response: registration.response, clientDataJSON: registration.clientDataJSON,
                expectedChallenge: registration.challenge, user: CeremonyFixture.user, now: TestAttestationPKI.nowSeconds)
        }
        #expect(error?.code == .untrustedAttestation)
        #expect(error?.description.contains("chains to no trust anchor (none configured)") == true, "\(String(describing: error))")
    }

    @Test(
        "py_webauthn accepts our full-attestation registration with our root, and refuses it with another root",
        .enabled(if: PyWebAuthn.available, Comment(rawValue: PyWebAuthn.missing)))
    func pyWebAuthn() throws {
        // py_webauthn checks validity against the real clock.
        let pki = TestAttestationPKI(around: Date())
        let registration = try Self.fullAttestation(pki)
        let json = try RegistrationResponseJSON(response: registration.response, clientDataJSON: registration.clientDataJSON)
        let credential = try #require(try JSONSerialization.jsonObject(with: Data(json.jsonString().utf8)))
        func request(root: String) -> [String: Any] {
            [
                "kind": "registration", "credential": credential, "challenge": Base64URL.encode(registration.challenge),
                "origin": CeremonyFixture.origin, "rpId": CeremonyFixture.rpId, "rootCertificates": ["packed": [root]],
            ]
        }
        let verified = try PyWebAuthn.verify(request(root: pki.rootPEM))
        #expect(verified["verified"] as? Bool == true)
        #expect(verified["fmt"] as? String == "packed")
        #expect(verified["credentialId"] as? String == Base64URL.encode(registration.passkey.credentialID))
        #expect(verified["aaguid"] as? String == "a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf")
        // Ours agrees, with the same root and the same clock.
        var rp = CeremonyFixture.relyingParty()
        rp.attestationTrustAnchors = try AttestationTrustAnchors(pem: pki.rootPEM)
        #expect(
            try rp.verifiedRegistration(
                response: registration.response, clientDataJSON: registration.clientDataJSON,
                expectedChallenge: registration.challenge, user: CeremonyFixture.user,
                now: UInt64(Date().timeIntervalSince1970)
            ).attestation.isTrusted)
        // The cross-check can fail: another root is refused by py_webauthn too.
        #expect(throws: PyWebAuthnError.self) { _ = try PyWebAuthn.verify(request(root: TestAttestationPKI().rootPEM)) }
    }
}

/// The phone's own full attestation (`phone --attestation packed-x5c`): a fresh certificate per
/// registration under ``SimulatedAttestationCA``, whose root any run can write.
@Suite("Phone: packed-x5c attestation under the simulated root")
struct PhoneFullAttestationTests {
    @Test("the authenticator's packed-x5c verifies as basic and chains to a root PEM written by another call")
    func chainsToSimulatedRoot() throws {
        var fixture = CeremonyFixture()
        let registration = try fixture.register(attestation: .packedFull)
        #expect(registration.response.fmt == "packed")
        #expect(registration.response.authData.attestedCredentialData?.aaguid == SimulatedAttestationCA.aaguid)
        var rp = CeremonyFixture.relyingParty()
        #expect(
            try rp.verifiedRegistration(
                response: registration.response, clientDataJSON: registration.clientDataJSON,
                expectedChallenge: registration.challenge, user: CeremonyFixture.user, now: CeremonyFixture.now
            ).attestation.trust == .notEstablished)
        // The root's bytes differ per call (randomized ECDSA); its key and subject do not.
        #expect(SimulatedAttestationCA.rootPEM() != SimulatedAttestationCA.rootPEM())
        rp.attestationTrustAnchors = try AttestationTrustAnchors(pem: SimulatedAttestationCA.rootPEM())
        let anchored = try rp.verifiedRegistration(
            response: registration.response, clientDataJSON: registration.clientDataJSON,
            expectedChallenge: registration.challenge, user: CeremonyFixture.user, now: CeremonyFixture.now)
        #expect(anchored.attestation.isTrusted)
        #expect(anchored.attestation.summary.contains("chained to trusted root"))
        #expect(anchored.attestation.summary.contains(SimulatedAttestationCA.rootCommonName))
        // A year and two days later the attestation certificate has expired.
        #expect(throws: RelyingPartyError(.untrustedAttestation)) {
            _ = try rp.verifiedRegistration(
                response: registration.response, clientDataJSON: registration.clientDataJSON,
                expectedChallenge: registration.challenge, user: CeremonyFixture.user,
                now: CeremonyFixture.now + 367 * 86_400)
        }
    }

    @Test("getInfo names the AAGUID that packed-x5c credentials and their certificate's extension carry; zeros otherwise (SimulatedPhone too)")
    func getInfoAAGUID() throws {
        var fixture = CeremonyFixture()
        let registration = try fixture.register(attestation: .packedFull)
        #expect(registration.response.authData.attestedCredentialData?.aaguid == SimulatedAttestationCA.aaguid)
        guard case .packed(_, _, let x5c?) = try registration.response.attestationStatement() else {
            Issue.record("packed-x5c sent no x5c")
            return
        }
        // id-fido-gen-ce-aaguid (1.3.6.1.4.1.45724.1.1.4), not critical, its OCTET STRING in the extnValue OCTET STRING.
        let fidoExtension: [UInt8] = [0x06, 0x0B, 0x2B, 0x06, 0x01, 0x04, 0x01, 0x82, 0xE5, 0x1C, 0x01, 0x01, 0x04, 0x04, 0x12, 0x04, 0x10]
        let certificate = try #require(x5c.first)
        #expect(certificate.indices.contains { certificate[$0...].starts(with: fidoExtension + SimulatedAttestationCA.aaguid) })

        let zeros = [UInt8](repeating: 0, count: 16)
        let simulated = SimulatedAttestationCA.identity(random: .system, now: CeremonyFixture.now)
        let own = AttestationIdentity(attestationKey: simulated.attestationKey, x5c: simulated.x5c, aaguid: Array(1...16))
        var authenticator = SoftwareAuthenticator()
        for (policy, expected) in [
            (SoftwareAuthenticator.Policy(attestation: .packedFull), SimulatedAttestationCA.aaguid),
            (SoftwareAuthenticator.Policy(attestation: .packedFull, attestationIdentity: own), own.aaguid),
            (SoftwareAuthenticator.Policy(attestation: .packedSelf), zeros), (SoftwareAuthenticator.Policy(), zeros),
        ] {
            #expect(SoftwareAuthenticator.getInfo(for: policy).aaguid == expected)
            let (bytes, _) = authenticator.handle(CTAP2Request.getInfo.encode(), policy: policy, now: CeremonyFixture.now)
            #expect(try CTAP2Response(bytes: bytes).decodePayload(as: AuthenticatorGetInfoResponse.self).aaguid == expected)
            #expect(try AuthenticatorGetInfoResponse(cbor: CBOR.decode(SimulatedPhone(policy: policy).getInfo)).aaguid == expected)
        }
        #expect(SoftwareAuthenticator.getInfo.aaguid == zeros)
    }

    @Test(
        "py_webauthn accepts the phone's packed-x5c registration with the simulated root",
        .enabled(if: PyWebAuthn.available, Comment(rawValue: PyWebAuthn.missing)))
    func pyWebAuthn() throws {
        var authenticator = SoftwareAuthenticator(random: .deterministic(seed: Array("py-x5c".utf8)))
        let challenge = Array(repeating: UInt8(7), count: 32)
        let clientDataJSON = CeremonyFixture.clientData(.create, challenge: challenge)
        let request = MakeCredentialRequest(
            clientDataHash: CollectedClientData.hash(ofJSON: clientDataJSON),
            rp: PublicKeyCredentialRpEntity(id: CeremonyFixture.rpId, name: "Example"), user: CeremonyFixture.user,
            pubKeyCredParams: [PublicKeyCredentialParameters(alg: .es256)], options: AuthenticatorOptions(rk: true, uv: true))
        // py_webauthn judges validity by the real clock.
        let (bytes, _) = authenticator.handle(
            CTAP2Request.makeCredential(request).encode(), policy: .init(attestation: .packedFull),
            now: UInt64(Date().timeIntervalSince1970))
        let response = try CTAP2Response(bytes: bytes).decodePayload(as: MakeCredentialResponse.self)
        let json = try RegistrationResponseJSON(response: response, clientDataJSON: clientDataJSON)
        let verified = try PyWebAuthn.verify([
            "kind": "registration", "credential": try JSONSerialization.jsonObject(with: Data(json.jsonString().utf8)),
            "challenge": Base64URL.encode(challenge), "origin": CeremonyFixture.origin, "rpId": CeremonyFixture.rpId,
            "rootCertificates": ["packed": [SimulatedAttestationCA.rootPEM()]],
        ])
        #expect(verified["verified"] as? Bool == true)
        #expect(verified["fmt"] as? String == "packed")
    }
}
