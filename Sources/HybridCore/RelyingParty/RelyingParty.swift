import CTAP2

/// A WebAuthn relying party's server-side checks (WebAuthn L3 §7.1 "Registering a New Credential"
/// and §7.2 "Verifying an Authentication Assertion"), for the desktop to verify what the phone sent
/// before printing it. Pure: the caller supplies the challenge it issued, the stored credential and
/// the time, and persists the returned ``RegisteredCredential``.
///
/// Only the steps that apply to a hybrid ceremony with ES256 credentials are run; each failure has
/// its own ``RelyingPartyError/Code``. See `Docs/RELYING_PARTY.md` for the order.
///
/// - ``verifyRegistration(response:clientDataJSON:expectedChallenge:user:allowedAttestation:registeredCredentialIds:now:)``
/// - ``verifiedRegistration(response:clientDataJSON:expectedChallenge:user:allowedAttestation:registeredCredentialIds:now:)``
/// - ``verifyAuthentication(response:clientDataJSON:expectedChallenge:credential:allowCredentials:)``
public struct RelyingParty: Hashable, Sendable {
    /// The RP ID, e.g. `example.com`.
    public var id: String
    /// The one origin ceremonies may come from, e.g. `https://example.com` (compared exactly).
    public var origin: String
    /// Whether UV must be set (the options' `userVerification` was `"required"`).
    public var requireUserVerification: Bool
    /// The roots a full (`x5c`) attestation must chain to; `nil` accepts a verified chain without
    /// establishing trust (`VerifiedAttestation.Trust.notEstablished`).
    public var attestationTrustAnchors: AttestationTrustAnchors?

    /// Creates a relying party.
    public init(
        id: String, origin: String, requireUserVerification: Bool = false,
        attestationTrustAnchors: AttestationTrustAnchors? = nil
    ) {
        self.id = id
        self.origin = origin
        self.requireUserVerification = requireUserVerification
        self.attestationTrustAnchors = attestationTrustAnchors
    }

    /// SHA-256 of ``id``: the `rpIdHash` authenticator data must carry.
    public var rpIdHash: [UInt8] { AuthenticatorData.rpIdHash(for: id) }

    // MARK: - Checks shared by both ceremonies

    /// Parses client data and checks type, challenge, origin and crossOrigin (§7.1 steps 5–10,
    /// §7.2 steps 10–14).
    func verifyClientData(
        _ clientDataJSON: [UInt8], type: CollectedClientData.CeremonyType, expectedChallenge: [UInt8]
    ) throws(RelyingPartyError) {
        let clientData: CollectedClientData
        do {
            clientData = try CollectedClientData(json: clientDataJSON)
        } catch {
            throw RelyingPartyError(.invalidClientData, error.reason)
        }
        guard clientData.type == type else {
            throw RelyingPartyError(.typeMismatch, "expected \(type.rawValue), got \(clientData.type.rawValue)")
        }
        guard constantTimeEqual(clientData.challenge, expectedChallenge) else {
            throw RelyingPartyError(
                .challengeMismatch,
                "expected \(Base64URL.encode(expectedChallenge)), got \(Base64URL.encode(clientData.challenge))")
        }
        guard clientData.origin == origin else {
            throw RelyingPartyError(.originMismatch, "expected \(origin), got \(clientData.origin)")
        }
        guard !clientData.crossOrigin else {
            throw RelyingPartyError(
                .crossOriginNotAllowed,
                "crossOrigin is true" + (clientData.topOrigin.map { " (topOrigin \($0))" } ?? ""))
        }
    }

    /// Checks rpIdHash, UP, UV and the backup flags (§7.1 steps 13–16, §7.2 steps 15–18).
    func verifyAuthenticatorData(_ authData: AuthenticatorData) throws(RelyingPartyError) {
        guard constantTimeEqual(authData.rpIdHash, rpIdHash) else {
            throw RelyingPartyError(
                .rpIdHashMismatch,
                "authenticator data is not for RP ID \(id) (rpIdHash \(Hex.encode(authData.rpIdHash)))")
        }
        guard authData.userPresent else {
            throw RelyingPartyError(.userNotPresent, "the UP flag is clear (flags \(authData.flags))")
        }
        if requireUserVerification, !authData.userVerified {
            throw RelyingPartyError(
                .userNotVerified, "user verification is required but the UV flag is clear (flags \(authData.flags))")
        }
        if authData.flags.contains(.backupState), !authData.flags.contains(.backupEligible) {
            throw RelyingPartyError(
                .backupStateWithoutEligibility, "BS is set but BE is clear (flags \(authData.flags))")
        }
    }
}
