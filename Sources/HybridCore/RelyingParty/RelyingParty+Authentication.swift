import CTAP2

extension RelyingParty {
    /// Verifies a getAssertion response as a relying party verifying an authentication assertion
    /// (WebAuthn L3 §7.2), and returns the credential record with its new counter and backup state.
    ///
    /// Order of checks: the credential is the stored one and belongs to this RP ID; it is in
    /// `allowCredentials` when that is non-empty; the user handle, if returned, is the credential's
    /// (and one is returned when `allowCredentials` was empty: the user was not identified before);
    /// client data (type `webauthn.get`, challenge, origin, crossOrigin false); rpIdHash; UP; UV when
    /// required; BS without BE; BE unchanged since registration; the signature over
    /// `authData ‖ SHA-256(clientDataJSON)` with the stored key; the signature counter.
    ///
    /// - Parameters:
    ///   - response: the authenticator's response. Its `credential` may be absent only when
    ///     `allowCredentials` had exactly one entry (CTAP 2.2 §6.2.3).
    ///   - clientDataJSON: the client data exactly as hashed for the authenticator.
    ///   - expectedChallenge: the challenge this relying party issued for the ceremony.
    ///   - credential: the stored record for the credential the response names.
    ///   - allowCredentials: the credential IDs the request allowed; `nil` or empty for a
    ///     discoverable-credential sign-in.
    /// - Throws: ``RelyingPartyError`` naming the first check that failed.
    public func verifyAuthentication(
        response: GetAssertionResponse,
        clientDataJSON: [UInt8],
        expectedChallenge: [UInt8],
        credential: RegisteredCredential,
        allowCredentials: [[UInt8]]? = nil
    ) throws(RelyingPartyError) -> RegisteredCredential {
        let allowList = allowCredentials ?? []
        let credentialId = try Self.returnedCredentialId(response, allowList: allowList)
        guard credentialId == credential.credentialId else {
            throw RelyingPartyError(
                .unknownCredential,
                "the response names credential \(Base64URL.encode(credentialId)), "
                    + "the stored one is \(Base64URL.encode(credential.credentialId))")
        }
        guard credential.rpId == id else {
            throw RelyingPartyError(
                .unknownCredential,
                "credential \(Base64URL.encode(credentialId)) belongs to \(credential.rpId), not \(id)")
        }
        guard allowList.isEmpty || allowList.contains(credentialId) else {
            throw RelyingPartyError(
                .credentialNotAllowed,
                "credential \(Base64URL.encode(credentialId)) is not among the \(allowList.count) allowed")
        }
        if let userHandle = response.user?.id {
            guard userHandle == credential.userId else {
                throw RelyingPartyError(
                    .userHandleMismatch,
                    "expected \(Base64URL.encode(credential.userId)), got \(Base64URL.encode(userHandle))")
            }
        } else if allowList.isEmpty {
            throw RelyingPartyError(
                .missingUserHandle, "a discoverable-credential sign-in must return the user handle")
        }

        try verifyClientData(clientDataJSON, type: .get, expectedChallenge: expectedChallenge)
        let authData = response.authData
        try verifyAuthenticatorData(authData)
        let backupEligible = authData.flags.contains(.backupEligible)
        guard backupEligible == credential.backupEligible else {
            throw RelyingPartyError(
                .backupEligibilityChanged,
                "BE was \(credential.backupEligible ? "set" : "clear") at registration, now \(backupEligible ? "set" : "clear")"
            )
        }

        let publicKey = try credential.coseKey()
        do {
            try response.verifySignature(
                clientDataHash: CollectedClientData.hash(ofJSON: clientDataJSON), publicKey: publicKey)
        } catch {
            throw RelyingPartyError(
                .invalidSignature, "credential \(Base64URL.encode(credentialId)): \(error.reason)")
        }

        if authData.signCount != 0 || credential.signCount != 0 {
            guard authData.signCount > credential.signCount else {
                throw RelyingPartyError(
                    .signCountNotIncreasing, "stored \(credential.signCount), received \(authData.signCount)")
            }
        }

        var updated = credential
        updated.signCount = authData.signCount
        updated.backupState = authData.flags.contains(.backupState)
        return updated
    }

    /// Verifies an assertion against every credential the relying party knows: picks the one the
    /// response names (for this RP ID) and runs
    /// ``verifyAuthentication(response:clientDataJSON:expectedChallenge:credential:allowCredentials:)``.
    ///
    /// - Throws: ``RelyingPartyError/Code/unknownCredential`` when none matches, then as above.
    public func verifyAuthentication(
        response: GetAssertionResponse,
        clientDataJSON: [UInt8],
        expectedChallenge: [UInt8],
        knownCredentials: some Sequence<RegisteredCredential>,
        allowCredentials: [[UInt8]]? = nil
    ) throws(RelyingPartyError) -> RegisteredCredential {
        let credentialId = try Self.returnedCredentialId(response, allowList: allowCredentials ?? [])
        guard let credential = knownCredentials.first(where: { $0.credentialId == credentialId && $0.rpId == id })
        else {
            throw RelyingPartyError(
                .unknownCredential, "no credential \(Base64URL.encode(credentialId)) is registered for \(id)")
        }
        return try verifyAuthentication(
            response: response, clientDataJSON: clientDataJSON, expectedChallenge: expectedChallenge,
            credential: credential, allowCredentials: allowCredentials)
    }

    /// The credential ID an assertion is for: the response's, or the single allowed one when the
    /// authenticator omitted it (CTAP 2.2 §6.2.3).
    private static func returnedCredentialId(
        _ response: GetAssertionResponse, allowList: [[UInt8]]
    ) throws(RelyingPartyError) -> [UInt8] {
        if let id = response.credential?.id { return id }
        guard allowList.count == 1 else {
            throw RelyingPartyError(
                .unknownCredential, "the response names no credential and the allow list has \(allowList.count) entries"
            )
        }
        return allowList[0]
    }
}
