/// Why WebAuthn JSON (options from a relying party, or a printed credential being checked) was
/// rejected. Two errors are equal when their ``code`` is; ``description`` is one line naming the
/// member, e.g. `invalid base64url: user.id is not base64url ("a+b/")`.
public struct WebAuthnJSONError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The family of failure.
    public enum Code: String, Hashable, Sendable, CaseIterable {
        // MARK: Reading JSON

        /// The input is not JSON, or not a JSON object.
        case invalidJSON
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

    /// Creates an error.
    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public static func == (lhs: WebAuthnJSONError, rhs: WebAuthnJSONError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// One line: `<summary>: <reason>`.
    public var description: String { "\(summary): \(reason)" }

    private var summary: String {
        switch code {
        case .invalidJSON: return "invalid JSON"
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

    // MARK: - Code values for tests (`#expect(throws: WebAuthnJSONError.missingChallenge)`)

    public static let invalidJSON = WebAuthnJSONError(.invalidJSON, "")
    public static let missingChallenge = WebAuthnJSONError(.missingChallenge, "")
    public static let missingMember = WebAuthnJSONError(.missingMember, "")
    public static let wrongType = WebAuthnJSONError(.wrongType, "")
    public static let invalidBase64URL = WebAuthnJSONError(.invalidBase64URL, "")
    public static let invalidValue = WebAuthnJSONError(.invalidValue, "")
    public static let noES256 = WebAuthnJSONError(.noES256, "")
    public static let clientDataMismatch = WebAuthnJSONError(.clientDataMismatch, "")
    public static let authenticatorDataMismatch = WebAuthnJSONError(.authenticatorDataMismatch, "")
    public static let credentialMismatch = WebAuthnJSONError(.credentialMismatch, "")
    public static let invalidAttestation = WebAuthnJSONError(.invalidAttestation, "")
    public static let invalidSignature = WebAuthnJSONError(.invalidSignature, "")
}
