import Crypto

/// ECDSA with P-256 and SHA-256 (COSE ES256, -7) over WebAuthn signed data, with DER signatures
/// as WebAuthn carries them (WebAuthn §6.5.5 "Signature Formats"). All primitives are swift-crypto's.
public enum ES256 {
    /// The data an attestation or assertion signature covers: `authData ‖ clientDataHash`
    /// (WebAuthn §6.3.3 step 11, §6.5.5).
    public static func signedData(authenticatorData: [UInt8], clientDataHash: [UInt8]) -> [UInt8] {
        authenticatorData + clientDataHash
    }

    /// Signs `message` (hashed with SHA-256 by swift-crypto) and returns the DER signature.
    ///
    /// - Throws: ``CTAP2Error/Code/signingFailed`` if swift-crypto refuses.
    public static func sign(_ message: [UInt8], with privateKey: P256.Signing.PrivateKey) throws(CTAP2Error) -> [UInt8] {
        do {
            return Array(try privateKey.signature(for: message).derRepresentation)
        } catch {
            throw CTAP2Error(.signingFailed, "ES256 signing failed")
        }
    }

    /// Signs `authData ‖ clientDataHash`.
    public static func sign(
        authenticatorData: [UInt8],
        clientDataHash: [UInt8],
        with privateKey: P256.Signing.PrivateKey
    ) throws(CTAP2Error) -> [UInt8] {
        try sign(signedData(authenticatorData: authenticatorData, clientDataHash: clientDataHash), with: privateKey)
    }

    /// Verifies a DER signature over `message`.
    ///
    /// - Throws: ``CTAP2Error/Code/invalidSignature`` when the DER is malformed or the signature
    ///   does not verify.
    public static func verify(
        signature: [UInt8],
        over message: [UInt8],
        publicKey: P256.Signing.PublicKey
    ) throws(CTAP2Error) {
        let parsed: P256.Signing.ECDSASignature
        do {
            parsed = try P256.Signing.ECDSASignature(derRepresentation: signature)
        } catch {
            // A raw r ‖ s (COSE's and JOSE's form) is the usual mistake: WebAuthn §6.5.5 wants DER.
            let hint = signature.count == 64 && signature.first != 0x30 ? " (64 bytes: a raw r ‖ s? WebAuthn signatures are DER)" : ""
            throw CTAP2Error(.invalidSignature, "ES256 signature is not a DER ECDSA-Sig-Value\(hint)")
        }
        guard publicKey.isValidSignature(parsed, for: message) else {
            throw CTAP2Error(.invalidSignature, "ES256 signature does not verify")
        }
    }

    /// Verifies a DER signature over `authData ‖ clientDataHash` with a credential key.
    public static func verify(
        signature: [UInt8],
        authenticatorData: [UInt8],
        clientDataHash: [UInt8],
        publicKey: COSEKey
    ) throws(CTAP2Error) {
        try verify(
            signature: signature,
            over: signedData(authenticatorData: authenticatorData, clientDataHash: clientDataHash),
            publicKey: publicKey.publicKey
        )
    }
}
