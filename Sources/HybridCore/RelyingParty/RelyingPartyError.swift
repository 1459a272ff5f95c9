import CTAP2

/// Why a relying party rejected a registration or an authentication (WebAuthn L3 §7.1, §7.2).
///
/// Every check has its own ``Code``, so tests can tell failures apart:
/// `#expect(throws: RelyingPartyError(.originMismatch))`. Two errors are equal when their codes are.
/// ``description`` is one line for people, such as
/// `origin mismatch: expected https://example.com, got https://evil.example`.
///
/// This is separate from ``HybridError`` on purpose: those are failures of the hybrid wire protocol,
/// these are verdicts about a well-formed WebAuthn ceremony.
public struct RelyingPartyError: CodedError {
    /// The check that failed.
    public enum Code: String, Hashable, Sendable, CaseIterable {
        /// `clientDataJSON` is not valid client data JSON (§7.1 step 5, §7.2 step 10).
        case invalidClientData
        /// Client data `type` is not `webauthn.create` / `webauthn.get` (§7.1 step 7, §7.2 step 11).
        case typeMismatch
        /// Client data `challenge` is not the challenge the relying party issued (§7.1 step 8).
        case challengeMismatch
        /// Client data `origin` is not the relying party's origin (§7.1 step 9).
        case originMismatch
        /// Client data `crossOrigin` is true; this relying party allows no cross-origin calls (§7.1 step 10).
        case crossOriginNotAllowed
        /// `rpIdHash` is not SHA-256 of the relying party ID (§7.1 step 13, §7.2 step 15).
        case rpIdHashMismatch
        /// The UP flag is clear (§7.1 step 14, §7.2 step 16).
        case userNotPresent
        /// The UV flag is clear although user verification is required (§7.1 step 15, §7.2 step 17).
        case userNotVerified
        /// The BS flag is set without the BE flag (§7.1 step 16, §7.2 step 18).
        case backupStateWithoutEligibility
        /// The BE flag differs from the one recorded at registration (§7.2 step 18).
        case backupEligibilityChanged
        /// A registration's authenticator data has no attested credential data (AT clear).
        case missingAttestedCredentialData
        /// The credential public key is not an ES256 COSE_Key (§7.1 step 20: not in `pubKeyCredParams`).
        case unsupportedCredentialKey
        /// The attestation format or variant is not verified here (another `fmt`, ECDAA).
        case unsupportedAttestation
        /// The attestation statement is malformed or its signature does not verify (§7.1 step 22).
        case invalidAttestation
        /// A full attestation's chain does not end at a configured trust anchor, or a certificate
        /// of it was outside its validity (only with ``RelyingParty/attestationTrustAnchors``).
        case untrustedAttestation
        /// The attestation verified but its type is not one the relying party accepts (§7.1 step 24).
        case attestationNotAllowed
        /// The credential ID is already registered (§7.1 step 26).
        case credentialAlreadyRegistered
        /// The response names a credential the relying party does not know for this RP ID (§7.2 step 7).
        case unknownCredential
        /// The credential is not one of `allowCredentials` (§7.2 step 5).
        case credentialNotAllowed
        /// No user handle was returned although the user was not identified beforehand (§7.2 step 6).
        case missingUserHandle
        /// The returned user handle is not the credential's user (§7.2 step 6).
        case userHandleMismatch
        /// The assertion signature does not verify with the stored public key (§7.2 step 21).
        case invalidSignature
        /// The signature counter did not increase: a possible cloned authenticator (§7.2 step 22).
        case signCountNotIncreasing
        /// The stored credential record is unusable (its public key does not decode).
        case invalidStoredCredential

        /// A short human summary, the start of ``RelyingPartyError/description``.
        public var summary: String {
            switch self {
            case .invalidClientData: return "invalid clientDataJSON"
            case .typeMismatch: return "client data type mismatch"
            case .challengeMismatch: return "challenge mismatch"
            case .originMismatch: return "origin mismatch"
            case .crossOriginNotAllowed: return "cross-origin call not allowed"
            case .rpIdHashMismatch: return "rpIdHash mismatch"
            case .userNotPresent: return "user not present"
            case .userNotVerified: return "user not verified"
            case .backupStateWithoutEligibility: return "backup state without backup eligibility"
            case .backupEligibilityChanged: return "backup eligibility changed"
            case .missingAttestedCredentialData: return "no attested credential data"
            case .unsupportedCredentialKey: return "unsupported credential public key"
            case .unsupportedAttestation: return "unsupported attestation"
            case .invalidAttestation: return "invalid attestation"
            case .untrustedAttestation: return "untrusted attestation"
            case .attestationNotAllowed: return "attestation type not allowed"
            case .credentialAlreadyRegistered: return "credential already registered"
            case .unknownCredential: return "unknown credential"
            case .credentialNotAllowed: return "credential not allowed"
            case .missingUserHandle: return "missing user handle"
            case .userHandleMismatch: return "user handle mismatch"
            case .invalidSignature: return "invalid signature"
            case .signCountNotIncreasing: return "sign count did not increase (possible cloned authenticator)"
            case .invalidStoredCredential: return "invalid stored credential"
            }
        }
    }

    /// The check that failed.
    public let code: Code
    /// What was expected and what was found. Never contains key material.
    public let reason: String

    /// An error of `code` with no reason, the value tests match thrown errors against.
    public init(_ code: Code) { self.init(code, "") }

    /// Creates an error.
    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    /// One line: `<summary>: <reason>`, e.g. `origin mismatch: expected https://a.example, got https://b.example`.
    public var description: String { reason.isEmpty ? code.summary : "\(code.summary): \(reason)" }
}
