import CTAP2
import HybridCore
import Testing

@Suite("Relying party: registration (WebAuthn L3 §7.1)")
struct RelyingPartyRegistrationTests {
    let rp = CeremonyFixture.relyingParty()

    func verify(
        _ registration: CeremonyFixture.Registration, rp: RelyingParty? = nil,
        allowed: Set<AttestationType> = [.none, .selfAttestation, .basic], registered: Set<[UInt8]> = []
    ) throws(RelyingPartyError) -> RegisteredCredential {
        // verifiedRegistration: the checks themselves, whatever the trust of a full attestation
        // (verifyRegistration refuses one without anchors: RelyingPartyFullAttestationTests).
        try (rp ?? self.rp).verifiedRegistration(
            response: registration.response, clientDataJSON: registration.clientDataJSON,
            expectedChallenge: registration.challenge, user: CeremonyFixture.user,
            allowedAttestation: allowed, registeredCredentialIds: registered, now: CeremonyFixture.now
        ).credential
    }

    @Test("a real registration verifies", arguments: SoftwareAuthenticator.Attestation.allCases)
    func happyPath(attestation: SoftwareAuthenticator.Attestation) throws {
        var fixture = CeremonyFixture()
        let registration = try fixture.register(attestation: attestation)
        let credential = try verify(registration, rp: CeremonyFixture.relyingParty(requireUserVerification: true))

        #expect(credential.credentialId == registration.passkey.credentialID)
        #expect(credential.userId == CeremonyFixture.user.id)
        #expect(credential.userName == "alice")
        #expect(credential.rpId == CeremonyFixture.rpId)
        #expect(credential.createdAt == CeremonyFixture.now)
        #expect(credential.signCount == 0)
        #expect(credential.attestationFormat == attestation.format)
        #expect(credential.backupEligible && credential.backupState)
        let key = try credential.coseKey()
        let expectedKey = try registration.passkey.signingKey().publicKey
        #expect(key == COSEKey(publicKey: expectedKey))
    }

    @Test("client data tampering is caught", arguments: SoftwareAuthenticator.Attestation.allCases)
    func clientData(attestation: SoftwareAuthenticator.Attestation) throws {
        var fixture = CeremonyFixture()
        let good = try fixture.register(attestation: attestation)
        let cases: [([UInt8], RelyingPartyError)] = [
            (CeremonyFixture.clientData(.create, challenge: flipped(good.challenge, at: 0)), RelyingPartyError(.challengeMismatch)),
            (
                CeremonyFixture.clientData(.create, challenge: good.challenge, origin: "https://evil.example"),
                RelyingPartyError(.originMismatch)
            ),
            (CeremonyFixture.clientData(.get, challenge: good.challenge), RelyingPartyError(.typeMismatch)),
            (CeremonyFixture.clientData(.create, challenge: good.challenge, crossOrigin: true), RelyingPartyError(.crossOriginNotAllowed)),
            (Array("{\"type\":\"webauthn.create\"".utf8), RelyingPartyError(.invalidClientData)),
            (
                Array(#"{"type":"webauthn.create","challenge":"a+b/","origin":"https://example.com"}"#.utf8),
                RelyingPartyError(.invalidClientData)
            ),
        ]
        for (clientDataJSON, expected) in cases {
            var tampered = good
            try tampered.resign(clientDataJSON: clientDataJSON)
            #expect(throws: expected) { try verify(tampered) }
        }
    }

    @Test("the error message says what was expected and what came")
    func originMessage() throws {
        var fixture = CeremonyFixture()
        var registration = try fixture.register()
        registration.clientDataJSON = CeremonyFixture.clientData(
            .create, challenge: registration.challenge, origin: "https://evil.example")
        do {
            _ = try verify(registration)
            Issue.record("verification passed")
        } catch {
            #expect(error.description == "origin mismatch: expected https://example.com, got https://evil.example")
        }
    }

    @Test("a credential for another RP ID is rejected")
    func otherRelyingParty() throws {
        var fixture = CeremonyFixture()
        let registration = try fixture.register(attestation: .packedSelf, rpId: "other.example")
        #expect(throws: RelyingPartyError(.rpIdHashMismatch)) { try verify(registration) }
    }

    @Test("flags: UP, UV when required, BS without BE", arguments: SoftwareAuthenticator.Attestation.allCases)
    func flags(attestation: SoftwareAuthenticator.Attestation) throws {
        var fixture = CeremonyFixture()
        let good = try fixture.register(attestation: attestation)
        let flags = good.response.authData.flags
        let requireUV = CeremonyFixture.relyingParty(requireUserVerification: true)

        var noUP = good
        try noUP.resign(authData: good.response.authData.with(flags: flags.subtracting(.userPresent)))
        #expect(throws: RelyingPartyError(.userNotPresent)) { try verify(noUP) }

        var noUV = good
        try noUV.resign(authData: good.response.authData.with(flags: flags.subtracting(.userVerified)))
        #expect(throws: RelyingPartyError(.userNotVerified)) { try verify(noUV, rp: requireUV) }
        // Without the requirement the same response is fine.
        #expect(try verify(noUV).credentialId == good.passkey.credentialID)

        var backupWithoutEligibility = good
        try backupWithoutEligibility.resign(
            authData: good.response.authData.with(flags: flags.subtracting(.backupEligible)))
        #expect(throws: RelyingPartyError(.backupStateWithoutEligibility)) { try verify(backupWithoutEligibility) }
    }

    @Test("a packed signature that does not verify is rejected")
    func badAttestationSignature() throws {
        var fixture = CeremonyFixture()
        var registration = try fixture.register(attestation: .packedSelf)
        guard case .bytes(let sig)? = registration.response.attStmt["sig"] else {
            Issue.record("no sig")
            return
        }
        registration.response.attStmt["sig"] = .bytes(flipped(sig, at: -1))
        #expect(throws: RelyingPartyError(.invalidAttestation)) { try verify(registration) }

        // Signed over other client data (same members, other order, so every field check passes).
        var otherClientData = try fixture.register(attestation: .packedSelf)
        let reordered =
            "{\"challenge\":\"\(Base64URL.encode(otherClientData.challenge))\",\"type\":\"webauthn.create\","
            + "\"origin\":\"https://example.com\",\"crossOrigin\":false}"
        otherClientData.clientDataJSON = Array(reordered.utf8)
        #expect(throws: RelyingPartyError(.invalidAttestation)) { try verify(otherClientData) }
    }

    @Test("attestation statements outside none / packed self / packed x5c, and a broken x5c")
    func attestationStatements() throws {
        var fixture = CeremonyFixture()
        let packed = try fixture.register(attestation: .packedSelf)
        let none = try fixture.register(attestation: .none)

        var withX5c = packed
        withX5c.response.attStmt["x5c"] = .array([.bytes([0x30, 0x00])])
        // x5c is verified now (RelyingPartyFullAttestationTests); this one holds no certificate.
        #expect(throws: RelyingPartyError(.invalidAttestation)) { try verify(withX5c) }

        var otherFormat = none
        otherFormat.response.fmt = "tpm"
        #expect(throws: RelyingPartyError(.unsupportedAttestation)) { try verify(otherFormat) }

        var nonEmptyNone = none
        nonEmptyNone.response.attStmt = ["alg": -7]
        #expect(throws: RelyingPartyError(.invalidAttestation)) { try verify(nonEmptyNone) }

        var wrongAlg = packed
        wrongAlg.response.attStmt["alg"] = -8
        #expect(throws: RelyingPartyError(.invalidAttestation)) { try verify(wrongAlg) }

        #expect(throws: RelyingPartyError(.attestationNotAllowed)) { try verify(none, allowed: [.selfAttestation]) }
        #expect(throws: RelyingPartyError(.attestationNotAllowed)) { try verify(packed, allowed: [.none]) }
    }

    @Test("the credential key must be an ES256 COSE_Key, and attested data must be present")
    func credentialKey() throws {
        var fixture = CeremonyFixture()
        let good = try fixture.register()
        guard let attested = good.response.authData.attestedCredentialData else {
            Issue.record("no attested data")
            return
        }
        // An Ed25519 OKP key: {1: 1, 3: -8, -1: 6, -2: x}.
        let okp: CBORValue = [1: 1, 3: -8, -1: 6, -2: .bytes([UInt8](repeating: 7, count: 32))]
        let eddsa = try AttestedCredentialData(
            aaguid: attested.aaguid, credentialId: attested.credentialId, credentialPublicKeyBytes: CBOR.encode(okp))
        var eddsaRegistration = good
        eddsaRegistration.response.authData = try AuthenticatorData(
            rpIdHash: good.response.authData.rpIdHash, flags: good.response.authData.flags, signCount: 0,
            attestedCredentialData: eddsa)
        #expect(throws: RelyingPartyError(.unsupportedCredentialKey)) { try verify(eddsaRegistration) }

        // An ES256 key padded with a member nothing reads, one byte past the limit: refused by
        // size (a store of such keys could grow until it cannot be saved); at the limit, accepted.
        func padded(to size: Int) throws -> CeremonyFixture.Registration {
            guard case .map(var members) = try CBOR.decode(attested.credentialPublicKey) else {
                throw RelyingPartyError(.unsupportedCredentialKey, "the fixture's key is not a map")
            }
            members[99] = .bytes([])
            // An empty byte string is its 1-byte head; one of 256...65535 bytes has a 3-byte head.
            let filler = size - CBOR.encode(.map(members)).count - 2
            #expect((256...65535).contains(filler))
            members[99] = .bytes([UInt8](repeating: 0, count: filler))
            let key = CBOR.encode(.map(members))
            #expect(key.count == size)
            var registration = good
            registration.response.authData = try AuthenticatorData(
                rpIdHash: good.response.authData.rpIdHash, flags: good.response.authData.flags, signCount: 0,
                attestedCredentialData: try AttestedCredentialData(
                    aaguid: attested.aaguid, credentialId: attested.credentialId, credentialPublicKeyBytes: key))
            return registration
        }
        let limit = RelyingParty.maxCredentialPublicKeySize
        #expect(throws: RelyingPartyError(.unsupportedCredentialKey)) { try verify(try padded(to: limit + 1)) }
        #expect(try verify(try padded(to: limit)).publicKey.count == limit)

        var noAttestedData = good
        noAttestedData.response.authData = try AuthenticatorData(
            rpIdHash: good.response.authData.rpIdHash, flags: good.response.authData.flags, signCount: 0)
        #expect(throws: RelyingPartyError(.missingAttestedCredentialData)) { try verify(noAttestedData) }
    }

    @Test("a credential ID that is already registered is rejected")
    func alreadyRegistered() throws {
        var fixture = CeremonyFixture()
        let registration = try fixture.register()
        #expect(throws: RelyingPartyError(.credentialAlreadyRegistered)) {
            try verify(registration, registered: [registration.passkey.credentialID])
        }
        #expect(try verify(registration, registered: [[1, 2, 3]]).credentialId == registration.passkey.credentialID)
    }

    @Test("every error code has a distinct one-line summary")
    func summaries() {
        let summaries = RelyingPartyError.Code.allCases.map(\.summary)
        #expect(Set(summaries).count == summaries.count)
        #expect(summaries.allSatisfy { !$0.isEmpty && !$0.contains("\n") })
        #expect(
            RelyingPartyError(.signCountNotIncreasing, "stored 5, received 5").description
                == "sign count did not increase (possible cloned authenticator): stored 5, received 5")
    }
}
