import CTAP2
import HybridCore

/// What a successful `hybrid-sim desktop` run produced.
public struct DesktopResult: Sendable {
    /// Whether the relying-party check ran.
    public enum RelyingPartyCheck: Sendable, Hashable {
        /// Verified against the relying-party store (registration: stored; sign-in: counter updated).
        case verified
        /// Not run: an assertion for `--options` whose credential is not in the store. Says why.
        case skipped(String)
    }

    /// `mc` or `ga`.
    public var request: QRPayload.RequestType
    /// The RP ID in effect.
    public var rpId: String
    /// The origin in the client data.
    public var origin: String
    /// The challenge in the client data.
    public var challenge: [UInt8]
    /// The WebAuthn L3 `PublicKeyCredential` JSON, compact (sorted keys).
    public var credentialJSON: String
    /// The same, pretty-printed (what is printed without `--json`).
    public var prettyCredentialJSON: String
    /// The credential ID.
    public var credentialId: [UInt8]
    /// The credential record as stored after this ceremony; `nil` when the check was skipped.
    public var credential: RegisteredCredential?
    /// For a verified sign-in: the stored counter before it.
    public var previousSignCount: UInt32?
    /// Whether the built-in relying-party check ran.
    public var relyingPartyCheck: RelyingPartyCheck
    /// Remarks printed on stderr (e.g. an attestation statement dropped for conveyance `none`).
    public var notes: [String]
    /// For a verified registration: what its attestation proved (type, `x5c`, trust).
    public var attestation: VerifiedAttestation? = nil
}
