import CTAP2
import HybridRuntime

/// `PublicKeyCredentialCreationOptionsJSON` (WebAuthn L3 §5.1.1, as `PublicKeyCredential.parseCreationOptionsFromJSON`
/// reads it): what a relying party's server sends to start a registration. py_webauthn's
/// `options_to_json` and SimpleWebAuthn's `generateRegistrationOptions` emit this shape.
///
/// Read with ``parse(_:)``, which ignores unknown members and extensions other than `credProps`, and rejects a missing or
/// empty challenge, bad base64url, a user handle outside 1…64 bytes, and parameters without ES256.
public struct PublicKeyCredentialCreationOptionsJSON: Hashable, Sendable, Codable {
    /// The relying party.
    public var rp: PublicKeyCredentialRpEntityJSON
    /// The user account.
    public var user: PublicKeyCredentialUserEntityJSON
    /// The challenge.
    public var challenge: Base64URLBytes
    /// Acceptable credential types and algorithms, most preferred first. Empty means ES256 and RS256
    /// (WebAuthn L3 §5.1.3 step 10).
    public var pubKeyCredParams: [PublicKeyCredentialParametersJSON]
    /// The ceremony timeout in milliseconds (a hint).
    public var timeout: Int?
    /// Credentials the user already has, which the authenticator must not create again.
    public var excludeCredentials: [PublicKeyCredentialDescriptorJSON]?
    /// Authenticator requirements (resident key, user verification, attachment).
    public var authenticatorSelection: AuthenticatorSelectionCriteriaJSON?
    /// Attestation conveyance: `"none"`, `"indirect"`, `"direct"` or `"enterprise"`.
    public var attestation: String?
    /// Client hints (`"security-key"`, `"client-device"`, `"hybrid"`).
    public var hints: [String]?
    /// The extension inputs acted on (`credProps`); all others are ignored.
    public var extensions: ClientExtensionInputsJSON?

    /// Creates options, for example the built-in relying party's own.
    public init(
        rp: PublicKeyCredentialRpEntityJSON,
        user: PublicKeyCredentialUserEntityJSON,
        challenge: [UInt8],
        pubKeyCredParams: [PublicKeyCredentialParametersJSON] = [.es256],
        timeout: Int? = 60_000,
        excludeCredentials: [PublicKeyCredentialDescriptorJSON]? = nil,
        authenticatorSelection: AuthenticatorSelectionCriteriaJSON? = nil,
        attestation: String? = "none",
        hints: [String]? = nil,
        extensions: ClientExtensionInputsJSON? = nil
    ) {
        self.rp = rp
        self.user = user
        self.challenge = Base64URLBytes(challenge)
        self.pubKeyCredParams = pubKeyCredParams
        self.timeout = timeout
        self.excludeCredentials = excludeCredentials
        self.authenticatorSelection = authenticatorSelection
        self.attestation = attestation
        self.hints = hints
        self.extensions = extensions
    }

    /// Reads and validates options JSON (UTF-8).
    ///
    /// - Throws: ``WebAuthnJSONError`` — `missingChallenge`, `invalidBase64URL`, `noES256`,
    ///   `missingMember`, `wrongType`, `invalidValue` or `invalidJSON`, naming the member.
    public static func parse(_ json: some Collection<UInt8>) throws(WebAuthnJSONError) -> Self {
        let options = try WebAuthnJSONCoding.decode(Self.self, from: json)
        try options.validate()
        return options
    }

    /// Checks what decoding alone does not.
    public func validate() throws(WebAuthnJSONError) { try validate(at: "") }

    /// Checks what decoding alone does not; messages name members with `path` before them
    /// (`publicKey.` for options inside a wrapper).
    func validate(at path: String) throws(WebAuthnJSONError) {
        guard !challenge.bytes.isEmpty else {
            throw WebAuthnJSONError(.missingChallenge, "\"\(path)challenge\" is empty")
        }
        guard (1...64).contains(user.id.bytes.count) else {
            throw WebAuthnJSONError(.invalidValue, "\(path)user.id must be 1…64 bytes, found \(user.id.bytes.count)")
        }
        guard offersES256 else { throw noES256(at: path) }
        if let rpId = rp.id {
            try WebAuthnOrigin.checkRpId(rpId, member: "\(path)rp.id")
        }
    }

    /// Why no ES256 is offered. Entries of a type other than `public-key` are skipped, as a browser
    /// skips them (WebAuthn L3 §5.1.3 step 10), so they are named as skipped, not listed among the
    /// offers (`[foo ES256 (-7)]` read as if ES256 were offered).
    private func noES256(at path: String) -> WebAuthnJSONError {
        let skipped = pubKeyCredParams.indices.filter { pubKeyCredParams[$0].type != "public-key" }
        let offered = pubKeyCredParams.filter { $0.type == "public-key" }.map {
            "\(COSEAlgorithmIdentifier(rawValue: $0.alg))"
        }
        guard let first = skipped.first else {
            let offers = pubKeyCredParams.map { "\($0.type) \(COSEAlgorithmIdentifier(rawValue: $0.alg))" }
            return WebAuthnJSONError(
                .noES256,
                "the relying party offers [\(offers.joined(separator: ", "))]; the phone only makes ES256 (-7) keys")
        }
        let type = PeerText.printable(pubKeyCredParams[first].type, limit: 40)
        let others = skipped.count > 1 ? " (nor are the types of \(skipped.count - 1) more)" : ""
        let left =
            offered.isEmpty
            ? "no public-key entry is left" : "the public-key entries left offer [\(offered.joined(separator: ", "))]"
        return WebAuthnJSONError(
            .noES256,
            "\(path)pubKeyCredParams[\(first)].type \"\(type)\" is not \"public-key\"\(others), and a browser skips "
                + "such entries (WebAuthn §5.1.3), so \(left); the phone only makes public-key ES256 (-7) keys")
    }

    /// The parameters in effect: `pubKeyCredParams`, or ES256 and RS256 when it is empty.
    public var effectivePubKeyCredParams: [PublicKeyCredentialParametersJSON] {
        pubKeyCredParams.isEmpty ? [.es256, PublicKeyCredentialParametersJSON(alg: -257)] : pubKeyCredParams
    }

    /// Whether ES256 public-key credentials are acceptable.
    public var offersES256: Bool {
        effectivePubKeyCredParams.contains {
            $0.type == "public-key" && $0.alg == COSEAlgorithmIdentifier.es256.rawValue
        }
    }

    /// `authenticatorSelection.userVerification`, `"preferred"` when absent or unknown.
    public var effectiveUserVerification: String {
        UserVerification.normalized(authenticatorSelection?.userVerification)
    }

    /// The `clientExtensionResults` a browser reports for these options with a hybrid phone:
    /// with `credProps` requested, `{"credProps": {"rk": R}}`, R whether the request asked for a
    /// discoverable credential (CTAP2 `rk`; a makeCredential response does not say, so Chrome
    /// reports what it asked for), otherwise `{}`.
    public var clientExtensionResults: ClientExtensionResultsJSON {
        extensions?.credProps == true
            ? ClientExtensionResultsJSON(credProps: .init(rk: effectiveResidentKey != "discouraged")) : ClientExtensionResultsJSON()
    }

    /// `authenticatorSelection.residentKey` in effect (WebAuthn L3 §5.4.4): a known value as
    /// given; absent or unknown (unknown values count as absent, §5.4), `"required"` when
    /// `requireResidentKey` is true and `"discouraged"` otherwise, as Chrome maps them.
    public var effectiveResidentKey: String {
        switch authenticatorSelection?.residentKey {
        case let value? where ["required", "preferred", "discouraged"].contains(value): return value
        default: return authenticatorSelection?.requireResidentKey == true ? "required" : "discouraged"
        }
    }

    /// Whether the relying party requires a discoverable credential.
    public var requiresResidentKey: Bool { effectiveResidentKey == "required" }

    /// `attestation` in effect (WebAuthn L3 §5.4.7): `"none"` when absent or unknown (unknown
    /// values count as absent, §5.4; Chrome's conversion maps them to none).
    public var effectiveAttestation: String {
        switch attestation {
        case let value? where ["none", "indirect", "direct", "enterprise"].contains(value): return value
        default: return "none"
        }
    }
}

/// `UserVerificationRequirement` values (WebAuthn L3 §5.8.6).
enum UserVerification {
    /// The value in effect: unknown or absent values count as `"preferred"`, as the specification says.
    static func normalized(_ value: String?) -> String {
        switch value {
        case "required", "discouraged": return value ?? "preferred"
        default: return "preferred"
        }
    }
}
