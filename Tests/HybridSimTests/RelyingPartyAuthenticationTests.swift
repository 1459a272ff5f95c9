import CTAP2
import HybridCore
import Testing

@Suite("Relying party: authentication (WebAuthn L3 §7.2)")
struct RelyingPartyAuthenticationTests {
    let rp = CeremonyFixture.relyingParty()

    /// A registered credential and a fresh, valid discoverable assertion for it.
    func ceremony(attestation: SoftwareAuthenticator.Attestation = .none) throws
        -> (fixture: CeremonyFixture, credential: RegisteredCredential, assertion: CeremonyFixture.Authentication)
    {
        var fixture = CeremonyFixture()
        let credential = try fixture.registeredCredential(attestation: attestation)
        let assertion = try fixture.authenticate()
        return (fixture, credential, assertion)
    }

    func verify(
        _ assertion: CeremonyFixture.Authentication, credential: RegisteredCredential, rp: RelyingParty? = nil,
        allow: [[UInt8]]? = nil
    ) throws(RelyingPartyError) -> RegisteredCredential {
        try (rp ?? self.rp).verifyAuthentication(
            response: assertion.response, clientDataJSON: assertion.clientDataJSON,
            expectedChallenge: assertion.challenge, credential: credential, allowCredentials: allow)
    }

    @Test("real assertions verify and the counter advances", arguments: SoftwareAuthenticator.Attestation.allCases)
    func happyPath(attestation: SoftwareAuthenticator.Attestation) throws {
        let start = try ceremony(attestation: attestation)
        var fixture = start.fixture
        let (credential, first) = (start.credential, start.assertion)
        #expect(first.response.user?.id == CeremonyFixture.user.id)
        let afterFirst = try verify(
            first, credential: credential, rp: CeremonyFixture.relyingParty(requireUserVerification: true))
        #expect(afterFirst.signCount == 1)
        #expect(afterFirst.backupState)

        // Replaying the first assertion against the updated record fails on the counter.
        #expect(throws: RelyingPartyError(.signCountNotIncreasing)) { try verify(first, credential: afterFirst) }

        // A second sign-in with an allow list (no user handle returned).
        let second = try fixture.authenticate(allowList: [credential.credentialId])
        #expect(second.response.user == nil)
        let afterSecond = try verify(second, credential: afterFirst, allow: [credential.credentialId])
        #expect(afterSecond.signCount == 2)

        // The lookup form finds the credential among several.
        let third = try fixture.authenticate()
        var otherFixture = CeremonyFixture(seed: "other")
        let other = try otherFixture.registeredCredential()
        let found = try rp.verifyAuthentication(
            response: third.response, clientDataJSON: third.clientDataJSON, expectedChallenge: third.challenge,
            knownCredentials: [other, afterSecond])
        #expect(found.signCount == 3 && found.credentialId == credential.credentialId)
    }

    @Test("client data tampering is caught (signature kept valid)")
    func clientData() throws {
        let (_, credential, good) = try ceremony()
        let cases: [([UInt8], RelyingPartyError)] = [
            (CeremonyFixture.clientData(.get, challenge: flipped(good.challenge, at: 5)), RelyingPartyError(.challengeMismatch)),
            (
                CeremonyFixture.clientData(.get, challenge: good.challenge, origin: "https://evil.example"),
                RelyingPartyError(.originMismatch)
            ),
            (
                CeremonyFixture.clientData(.get, challenge: good.challenge, origin: "http://example.com"),
                RelyingPartyError(.originMismatch)
            ),
            (CeremonyFixture.clientData(.create, challenge: good.challenge), RelyingPartyError(.typeMismatch)),
            (CeremonyFixture.clientData(.get, challenge: good.challenge, crossOrigin: true), RelyingPartyError(.crossOriginNotAllowed)),
            (Array("not json".utf8), RelyingPartyError(.invalidClientData)),
        ]
        for (clientDataJSON, expected) in cases {
            var tampered = good
            try tampered.resign(clientDataJSON: clientDataJSON)
            #expect(throws: expected) { try verify(tampered, credential: credential) }
        }
    }

    @Test("authenticator data tampering is caught (signature kept valid)")
    func authenticatorData() throws {
        let (_, credential, good) = try ceremony()
        let authData = good.response.authData
        let flags = authData.flags
        let requireUV = CeremonyFixture.relyingParty(requireUserVerification: true)
        let cases: [(AuthenticatorData, RelyingParty?, RelyingPartyError)] = [
            (try authData.with(rpIdHash: AuthenticatorData.rpIdHash(for: "evil.example")), nil, RelyingPartyError(.rpIdHashMismatch)),
            (try authData.with(flags: flags.subtracting(.userPresent)), nil, RelyingPartyError(.userNotPresent)),
            (try authData.with(flags: flags.subtracting(.userVerified)), requireUV, RelyingPartyError(.userNotVerified)),
            (try authData.with(flags: flags.subtracting(.backupEligible)), nil, RelyingPartyError(.backupStateWithoutEligibility)),
            (
                try authData.with(flags: flags.subtracting([.backupEligible, .backupState])), nil,
                RelyingPartyError(.backupEligibilityChanged)
            ),
        ]
        for (tamperedData, party, expected) in cases {
            var tampered = good
            try tampered.resign(authData: tamperedData)
            #expect(throws: expected) { try verify(tampered, credential: credential, rp: party) }
        }
        // UV clear is fine when not required.
        var noUV = good
        try noUV.resign(authData: authData.with(flags: flags.subtracting(.userVerified)))
        #expect(try verify(noUV, credential: credential).signCount == 1)
    }

    @Test("signature tampering is caught")
    func signature() throws {
        let (_, credential, good) = try ceremony()
        for index in [8, 20, -1] {
            var tampered = good
            tampered.response.signature = flipped(good.response.signature, at: index)
            #expect(throws: RelyingPartyError(.invalidSignature)) { try verify(tampered, credential: credential) }
        }
        // Authenticator data changed after signing.
        var changedCounter = good
        changedCounter.response.authData = try good.response.authData.with(signCount: 99)
        #expect(throws: RelyingPartyError(.invalidSignature)) { try verify(changedCounter, credential: credential) }
        // Signed by another credential's key.
        var otherFixture = CeremonyFixture(seed: "other")
        let other = try otherFixture.registeredCredential()
        var otherKey = credential
        otherKey.publicKey = other.publicKey
        #expect(throws: RelyingPartyError(.invalidSignature)) { try verify(good, credential: otherKey) }
    }

    @Test("credential identity: unknown, other RP, not allowed, omitted")
    func credentialIdentity() throws {
        let (fixture, credential, good) = try ceremony()

        var otherId = good
        otherId.response.credential = PublicKeyCredentialDescriptor(id: [1, 2, 3, 4])
        #expect(throws: RelyingPartyError(.unknownCredential)) { try verify(otherId, credential: credential) }
        #expect(throws: RelyingPartyError(.unknownCredential)) {
            try rp.verifyAuthentication(
                response: good.response, clientDataJSON: good.clientDataJSON, expectedChallenge: good.challenge,
                knownCredentials: [RegisteredCredential]())
        }
        var otherRP = credential
        otherRP.rpId = "other.example"
        #expect(throws: RelyingPartyError(.unknownCredential)) { try verify(good, credential: otherRP) }

        #expect(throws: RelyingPartyError(.credentialNotAllowed)) {
            try verify(good, credential: credential, allow: [[9, 9, 9], [8, 8, 8]])
        }

        // An authenticator may omit the credential when exactly one was allowed.
        var fixture2 = fixture
        var omitted = try fixture2.authenticate(allowList: [credential.credentialId])
        omitted.response.credential = nil
        #expect(try verify(omitted, credential: credential, allow: [credential.credentialId]).signCount == 2)
        #expect(throws: RelyingPartyError(.unknownCredential)) { try verify(omitted, credential: credential) }
    }

    @Test("user handle: must match, and must be present for a discoverable sign-in")
    func userHandle() throws {
        let (_, credential, good) = try ceremony()
        var mismatch = good
        mismatch.response.user = PublicKeyCredentialUserEntity(id: Array("user-handle-mallory".utf8))
        #expect(throws: RelyingPartyError(.userHandleMismatch)) { try verify(mismatch, credential: credential) }

        var missing = good
        missing.response.user = nil
        #expect(throws: RelyingPartyError(.missingUserHandle)) { try verify(missing, credential: credential) }
        // With the user identified by an allow list the handle is optional.
        #expect(try verify(missing, credential: credential, allow: [credential.credentialId]).signCount == 1)
    }

    @Test("sign counter: must increase unless both are zero")
    func signCount() throws {
        let (_, credential, good) = try ceremony()
        for stored: UInt32 in [1, 5, .max] {
            var record = credential
            record.signCount = stored
            #expect(throws: RelyingPartyError(.signCountNotIncreasing)) { try verify(good, credential: record) }
        }
        // An authenticator without a counter (0 and 0) passes.
        var zero = good
        try zero.resign(authData: good.response.authData.with(signCount: 0))
        #expect(try verify(zero, credential: credential).signCount == 0)
        // Counter going back to zero after being used is a clone signal too.
        var used = credential
        used.signCount = 3
        #expect(throws: RelyingPartyError(.signCountNotIncreasing)) { try verify(zero, credential: used) }
    }

    @Test("a stored credential whose key does not decode is reported")
    func invalidStoredCredential() throws {
        let (_, credential, good) = try ceremony()
        var broken = credential
        broken.publicKey = [0xA0]
        #expect(throws: RelyingPartyError(.invalidStoredCredential)) { try verify(good, credential: broken) }
    }
}
