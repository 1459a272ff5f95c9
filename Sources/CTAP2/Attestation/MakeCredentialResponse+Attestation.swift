import Crypto

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

    /// The attestation statement read from ``fmt`` and ``attStmt``.
    public func attestationStatement() throws(CTAP2Error) -> AttestationStatement {
        try AttestationStatement(fmt: fmt, attStmt: attStmt)
    }

    /// Verifies the attestation statement as a relying party does (WebAuthn §7.1 step 21), for the
    /// formats this module supports.
    ///
    /// - `"none"`: the statement must be empty.
    /// - `"packed"` self attestation: `alg` must be ES256 and equal to the credential key's algorithm,
    ///   and `sig` must verify over `authData ‖ clientDataHash` with the credential public key.
    ///
    /// - Throws: ``CTAP2Error/Code/unsupportedAttestation`` for other formats and for `x5c`
    ///   (full attestation with a certificate chain); ``CTAP2Error/Code/unsupportedAlgorithm``;
    ///   ``CTAP2Error/Code/invalidSignature``; and the ``AttestationStatement`` and ``COSEKey`` errors.
    @discardableResult
    public func verifyAttestation(clientDataHash: [UInt8]) throws(CTAP2Error) -> AttestationType {
        switch try attestationStatement() {
        case .none:
            return .none
        case .packed(let alg, let sig, let x5c):
            guard x5c == nil else {
                throw CTAP2Error(.unsupportedAttestation, "packed attestation with x5c (certificate chain) is not supported")
            }
            guard alg == .es256 else {
                throw CTAP2Error(.unsupportedAlgorithm, "packed self attestation alg \(alg) is not ES256 (-7)")
            }
            guard let attested = authData.attestedCredentialData else {
                throw CTAP2Error(.missingField, "packed attestation: authData has no attested credential data")
            }
            let key = try attested.coseKey()
            try ES256.verify(signature: sig, authenticatorData: authData.bytes, clientDataHash: clientDataHash, publicKey: key)
            return .selfAttestation
        }
    }
}
