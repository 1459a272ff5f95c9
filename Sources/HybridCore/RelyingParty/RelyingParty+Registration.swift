import CTAP2
import Foundation

/// A verified registration: the record to store and what its attestation proved.
public struct VerifiedRegistration: Hashable, Sendable {
    /// The credential record to store.
    public let credential: RegisteredCredential
    /// The attestation type, trust path and trust (WebAuthn L3 §7.1 steps 21–24).
    public let attestation: VerifiedAttestation
}

extension RelyingParty {
    /// The largest credential public key (COSE_Key bytes) a registration may carry: an ES256 key
    /// is 77 bytes and an RSA-4096 one about 540, so only a key padded with extra members is over.
    public static let maxCredentialPublicKeySize = 1024

    /// Verifies a registration as ``verifiedRegistration(response:clientDataJSON:expectedChallenge:user:allowedAttestation:registeredCredentialIds:now:)``
    /// does, and returns only the record to store. Having no way to say what an attestation
    /// proved, it refuses a full (`basic`) attestation whose trust is not established (no
    /// ``attestationTrustAnchors``, WebAuthn §7.1 step 25: not trustworthy), as it refused every
    /// `x5c` before full attestation was verified; `verifiedRegistration` returns such a one with its
    /// trust for the caller to judge.
    ///
    /// - Parameters:
    ///   - response: the authenticator's response (its attestation object).
    ///   - clientDataJSON: the client data exactly as hashed for the authenticator.
    ///   - expectedChallenge: the challenge this relying party issued for the ceremony.
    ///   - user: the account the credential was created for (from the creation options).
    ///   - allowedAttestation: the attestation types accepted (all three by default).
    ///   - registeredCredentialIds: credential IDs already registered, for §7.1 step 26.
    ///   - now: seconds since the Unix epoch, recorded as ``RegisteredCredential/createdAt``.
    /// - Throws: ``RelyingPartyError`` naming the first check that failed;
    ///   ``RelyingPartyError/Code/untrustedAttestation`` for a `basic` attestation not anchored.
    public func verifyRegistration(
        response: MakeCredentialResponse,
        clientDataJSON: [UInt8],
        expectedChallenge: [UInt8],
        user: PublicKeyCredentialUserEntity,
        allowedAttestation: Set<AttestationType> = [.none, .selfAttestation, .basic],
        registeredCredentialIds: Set<[UInt8]> = [],
        now: UInt64
    ) throws(RelyingPartyError) -> RegisteredCredential {
        let verified = try verifiedRegistration(
            response: response, clientDataJSON: clientDataJSON, expectedChallenge: expectedChallenge, user: user,
            allowedAttestation: allowedAttestation, registeredCredentialIds: registeredCredentialIds, now: now)
        guard verified.attestation.type != .basic || verified.attestation.isTrusted else {
            throw RelyingPartyError(
                .untrustedAttestation,
                "a full (x5c) attestation that chains to no trust anchor (none configured); give attestationTrustAnchors, "
                    + "or call verifiedRegistration to judge its trust")
        }
        return verified.credential
    }

    /// Verifies a makeCredential response as a relying party registering a new credential
    /// (WebAuthn L3 §7.1), and returns the record to store with what its attestation proved.
    ///
    /// Order of checks: client data (type `webauthn.create`, challenge in constant time, origin,
    /// crossOrigin false); rpIdHash; UP; UV when required; BS without BE; attested credential data
    /// present; credential key at most ``maxCredentialPublicKeySize`` bytes and an ES256 COSE_Key;
    /// attestation statement (`none` must be empty; `packed` self must be alg -7 with a signature
    /// by the credential key over `authData ‖ SHA-256(clientDataJSON)`; `packed` with `x5c` must be
    /// alg -7 signed by the attestation certificate's key, meet WebAuthn §8.2.1, each certificate
    /// signed by the next, and with ``attestationTrustAnchors`` end at one of them, every
    /// certificate valid at `now`; other formats are unsupported); attestation type allowed;
    /// credential ID not yet registered.
    ///
    /// - Parameters:
    ///   - response: the authenticator's response (its attestation object).
    ///   - clientDataJSON: the client data exactly as hashed for the authenticator.
    ///   - expectedChallenge: the challenge this relying party issued for the ceremony.
    ///   - user: the account the credential was created for (from the creation options).
    ///   - allowedAttestation: the attestation types accepted (all three by default).
    ///   - registeredCredentialIds: credential IDs already registered, for §7.1 step 26.
    ///   - now: seconds since the Unix epoch, recorded as ``RegisteredCredential/createdAt`` and the
    ///     time attestation certificates must be valid at (with trust anchors).
    /// - Throws: ``RelyingPartyError`` naming the first check that failed.
    public func verifiedRegistration(
        response: MakeCredentialResponse,
        clientDataJSON: [UInt8],
        expectedChallenge: [UInt8],
        user: PublicKeyCredentialUserEntity,
        allowedAttestation: Set<AttestationType> = [.none, .selfAttestation, .basic],
        registeredCredentialIds: Set<[UInt8]> = [],
        now: UInt64
    ) throws(RelyingPartyError) -> VerifiedRegistration {
        try verifyClientData(clientDataJSON, type: .create, expectedChallenge: expectedChallenge)
        let authData = response.authData
        try verifyAuthenticatorData(authData)

        guard let attested = authData.attestedCredentialData else {
            throw RelyingPartyError(.missingAttestedCredentialData, "the AT flag is clear in a registration")
        }
        // A key is stored as it came: one padded with members nothing reads could fill the
        // relying party's store until it can no longer be saved or read.
        guard attested.credentialPublicKey.count <= Self.maxCredentialPublicKeySize else {
            throw RelyingPartyError(
                .unsupportedCredentialKey,
                "the credential public key is \(attested.credentialPublicKey.count) bytes; this relying party keeps keys of at most \(Self.maxCredentialPublicKeySize) (an ES256 key is 77)")
        }
        do {
            _ = try attested.coseKey()
        } catch {
            throw RelyingPartyError(
                .unsupportedCredentialKey, "\(error.reason); only ES256 (-7) P-256 keys are accepted")
        }

        let attestation = try verifyAttestationStatement(
            response, clientDataHash: CollectedClientData.hash(ofJSON: clientDataJSON), now: now)
        let attestationType = attestation.type
        guard allowedAttestation.contains(attestationType) else {
            let allowed = allowedAttestation.map(\.rawValue).sorted().joined(separator: ", ")
            throw RelyingPartyError(
                .attestationNotAllowed, "got \(attestationType.rawValue) attestation, allowed: [\(allowed)]")
        }
        guard !registeredCredentialIds.contains(attested.credentialId) else {
            throw RelyingPartyError(
                .credentialAlreadyRegistered,
                "credential \(Base64URL.encode(attested.credentialId)) is already registered")
        }

        let credential = RegisteredCredential(
            credentialId: attested.credentialId,
            publicKey: attested.credentialPublicKey,
            signCount: authData.signCount,
            userId: user.id,
            userName: user.name,
            rpId: id,
            createdAt: now,
            attestationFormat: response.fmt,
            backupEligible: authData.flags.contains(.backupEligible),
            backupState: authData.flags.contains(.backupState)
        )
        return VerifiedRegistration(credential: credential, attestation: attestation)
    }

    /// §7.1 steps 19–23 for the formats supported here, mapping the CTAP2 module's verdicts to
    /// relying-party codes.
    private func verifyAttestationStatement(
        _ response: MakeCredentialResponse, clientDataHash: [UInt8], now: UInt64
    ) throws(RelyingPartyError) -> VerifiedAttestation {
        do {
            return try response.verifyAttestation(
                clientDataHash: clientDataHash, trustAnchors: attestationTrustAnchors,
                now: Date(timeIntervalSince1970: TimeInterval(now)))
        } catch {
            switch error.code {
            case .unsupportedAttestation:
                throw RelyingPartyError(.unsupportedAttestation, error.reason)
            case .untrustedAttestation:
                throw RelyingPartyError(.untrustedAttestation, "\(response.fmt): \(error.reason)")
            default:
                throw RelyingPartyError(.invalidAttestation, "\(response.fmt): \(error.reason)")
            }
        }
    }
}
