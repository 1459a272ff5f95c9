import CTAP2

/// Why WebAuthn JSON (options from a relying party, or a printed credential being checked) was
/// rejected. Two errors are equal when their ``code`` is; ``description`` is one line naming the
/// member, e.g. `invalid base64url: user.id is not base64url ("a+b/")`.
public struct WebAuthnJSONError: CodedError {
    /// The family of failure.
    public enum Code: String, Hashable, Sendable, CaseIterable {
        // MARK: Reading JSON

        /// The input is not JSON, or not a JSON object.
        case invalidJSON
        /// The object is neither options (none of their members at its top level) nor a wrapper
        /// ``WebAuthnOptionsShape`` knows, e.g. `{"status": "ok", "data": {…}}`.
        case unrecognisedDocument
        /// The options have no `challenge` (or an empty one).
        case missingChallenge
        /// A required member is absent.
        case missingMember
        /// A member has the wrong JSON type.
        case wrongType
        /// A member that must be unpadded base64url is not.
        case invalidBase64URL
        /// A member has a value the specification does not allow.
        case invalidValue
        /// `pubKeyCredParams` offers no `{"type": "public-key", "alg": -7}` (ES256).
        case noES256

        // MARK: Checking a printed credential

        /// `clientDataJSON` does not hold what the ceremony expects (type, challenge, origin, crossOrigin).
        case clientDataMismatch
        /// Authenticator data is malformed or does not match (rpIdHash, flags, copies that disagree).
        case authenticatorDataMismatch
        /// The credential ID, public key or user handle does not match.
        case credentialMismatch
        /// `attestationObject` is malformed or its statement does not verify.
        case invalidAttestation
        /// The assertion signature does not verify with the given key.
        case invalidSignature
    }

    /// The family of failure.
    public let code: Code
    /// Which member and what is wrong with it.
    public let reason: String

    /// An error of `code` with no reason, the value tests match thrown errors against.
    public init(_ code: Code) { self.init(code, "") }

    /// Creates an error.
    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    /// One line: `<summary>: <reason>`.
    public var description: String { "\(summary): \(reason)" }

    private var summary: String {
        switch code {
        case .invalidJSON: return "invalid JSON"
        case .unrecognisedDocument: return "not WebAuthn options"
        case .missingChallenge: return "missing challenge"
        case .missingMember: return "missing member"
        case .wrongType: return "wrong type"
        case .invalidBase64URL: return "invalid base64url"
        case .invalidValue: return "invalid value"
        case .noES256: return "no ES256 in pubKeyCredParams"
        case .clientDataMismatch: return "client data mismatch"
        case .authenticatorDataMismatch: return "authenticator data mismatch"
        case .credentialMismatch: return "credential mismatch"
        case .invalidAttestation: return "invalid attestation"
        case .invalidSignature: return "invalid signature"
        }
    }
}
