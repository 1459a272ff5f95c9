import Crypto
import Foundation

extension MakeCredentialResponse {
    /// A response with `"none"` attestation: `fmt` `"none"`, `attStmt` `{}` (WebAuthn §8.7).
    public static func none(authData: AuthenticatorData) -> MakeCredentialResponse {
        MakeCredentialResponse(fmt: AttestationStatement.noneFormat, authData: authData, attStmt: [:])
    }

    /// A response with `"packed"` self attestation (WebAuthn §8.2): `attStmt` is
    /// `{"alg": -7, "sig": DER ES256 over authData ‖ clientDataHash}`, signed with the new credential's
    /// own private key.
    ///
    /// - Throws: ``CTAP2Error/Code/missingField`` when `authData` has no attested credential data,
    ///   ``CTAP2Error/Code/invalidAttestation`` when `privateKey` does not belong to its credential
    ///   public key, ``CTAP2Error/Code/signingFailed``.
    public static func packedSelf(
        authData: AuthenticatorData,
        clientDataHash: [UInt8],
        privateKey: P256.Signing.PrivateKey
    ) throws(CTAP2Error) -> MakeCredentialResponse {
        guard let attested = authData.attestedCredentialData else {
            throw CTAP2Error(.missingField, "self attestation needs attested credential data in authData")
        }
        guard try attested.coseKey() == COSEKey(publicKey: privateKey.publicKey) else {
            throw CTAP2Error(.invalidAttestation, "self attestation key does not match the credential public key")
        }
        let sig = try ES256.sign(authenticatorData: authData.bytes, clientDataHash: clientDataHash, with: privateKey)
        let statement = AttestationStatement.packed(alg: .es256, sig: sig, x5c: nil)
        return MakeCredentialResponse(fmt: statement.fmt, authData: authData, attStmt: statement.attStmt)
    }

    /// A response with `"packed"` full attestation (WebAuthn §8.2): `attStmt` is
    /// `{"alg": -7, "sig": DER ES256 over authData ‖ clientDataHash, "x5c": [attestation certificate, …]}`,
    /// signed with the attestation key the first certificate of `x5c` certifies.
    ///
    /// Nothing about the certificates is checked here: a relying party's
    /// ``verifyAttestation(clientDataHash:trustAnchors:now:)`` does that, and tests send broken ones.
    ///
    /// - Throws: ``CTAP2Error/Code/missingField`` when `authData` has no attested credential data or
    ///   `x5c` is empty, ``CTAP2Error/Code/signingFailed``.
    public static func packedFull(
        authData: AuthenticatorData,
        clientDataHash: [UInt8],
        attestationKey: P256.Signing.PrivateKey,
        x5c: [[UInt8]]
    ) throws(CTAP2Error) -> MakeCredentialResponse {
        guard authData.attestedCredentialData != nil else {
            throw CTAP2Error(.missingField, "full attestation needs attested credential data in authData")
        }
        guard !x5c.isEmpty else {
            throw CTAP2Error(.missingField, "full attestation needs the attestation certificate in x5c")
        }
        let sig = try ES256.sign(authenticatorData: authData.bytes, clientDataHash: clientDataHash, with: attestationKey)
        let statement = AttestationStatement.packed(alg: .es256, sig: sig, x5c: x5c)
        return MakeCredentialResponse(fmt: statement.fmt, authData: authData, attStmt: statement.attStmt)
    }

    /// The attestation statement read from ``fmt`` and ``attStmt``.
    public func attestationStatement() throws(CTAP2Error) -> AttestationStatement {
        try AttestationStatement(fmt: fmt, attStmt: attStmt)
    }

    /// Verifies the attestation statement as a relying party does (WebAuthn §7.1 step 21) with no
    /// trust anchors; see ``verifyAttestation(clientDataHash:trustAnchors:now:)``.
    @discardableResult
    public func verifyAttestation(clientDataHash: [UInt8]) throws(CTAP2Error) -> AttestationType {
        try verifyAttestation(clientDataHash: clientDataHash, trustAnchors: nil, now: Date()).type
    }

    /// Verifies the attestation statement as a relying party does (WebAuthn §7.1 steps 21–24), for
    /// the formats this module supports.
    ///
    /// - `"none"`: the statement must be empty.
    /// - `"packed"` self attestation (no `x5c`): `alg` must be ES256 and `sig` must verify over
    ///   `authData ‖ clientDataHash` with the credential public key.
    /// - `"packed"` full attestation (`x5c`): `alg` must be ES256, `x5c[0]` a P-256 key with which
    ///   `sig` verifies, `x5c[0]` must meet WebAuthn §8.2.1 (version 3; Subject C, O,
    ///   OU `Authenticator Attestation`, CN; not a CA; a non-critical `id-fido-gen-ce-aaguid` equal to
    ///   authData's `aaguid`, if present), and each certificate must be signed by the next. With
    ///   `trustAnchors` the chain must also end at one of them, each certificate and the root valid
    ///   at `now`; without, the verdict's trust is ``VerifiedAttestation/Trust-swift.enum/notEstablished``.
    ///
    /// - Parameters:
    ///   - clientDataHash: SHA-256 of the client data JSON.
    ///   - trustAnchors: the roots a full attestation must chain to, or `nil` for none configured.
    ///   - now: the time certificate validity is checked against (only with `trustAnchors`).
    /// - Throws: ``CTAP2Error/Code/unsupportedAttestation`` for other formats and ECDAA;
    ///   ``CTAP2Error/Code/unsupportedAlgorithm``; ``CTAP2Error/Code/invalidSignature``;
    ///   ``CTAP2Error/Code/invalidAttestation`` naming the §8.2.1 rule or chain link that failed;
    ///   ``CTAP2Error/Code/untrustedAttestation``; and the ``AttestationStatement`` and ``COSEKey`` errors.
    public func verifyAttestation(
        clientDataHash: [UInt8], trustAnchors: AttestationTrustAnchors?, now: Date
    ) throws(CTAP2Error) -> VerifiedAttestation {
        switch try attestationStatement() {
        case .none:
            return VerifiedAttestation(type: .none)
        case .packed(let alg, let sig, let x5c):
            guard let attested = authData.attestedCredentialData else {
                throw CTAP2Error(.missingField, "packed attestation: authData has no attested credential data")
            }
            if let x5c {
                return try PackedCertificateChain.verify(
                    x5c: x5c, alg: alg, sig: sig,
                    signedData: ES256.signedData(authenticatorData: authData.bytes, clientDataHash: clientDataHash),
                    aaguid: attested.aaguid, trustAnchors: trustAnchors, now: now)
            }
            guard alg == .es256 else {
                throw CTAP2Error(.unsupportedAlgorithm, "packed self attestation alg \(alg) is not ES256 (-7)")
            }
            let key = try attested.coseKey()
            try ES256.verify(signature: sig, authenticatorData: authData.bytes, clientDataHash: clientDataHash, publicKey: key)
            return VerifiedAttestation(type: .selfAttestation)
        }
    }
}
