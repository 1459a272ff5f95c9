import CTAP2
import Foundation

/// `AuthenticationResponseJSON` (WebAuthn L3 §5.1 `PublicKeyCredential.toJSON()` for an assertion):
/// what the desktop prints after a verified getAssertion, for a relying party's
/// `verify_authentication_response` / `verifyAuthenticationResponse` to consume.
///
/// ```json
/// {"authenticatorAttachment": "cross-platform", "clientExtensionResults": {}, "id": "…", "rawId": "…",
///  "response": {"authenticatorData": "…", "clientDataJSON": "…", "signature": "…", "userHandle": "…"},
///  "type": "public-key"}
/// ```
///
/// `userHandle` is present when the authenticator returned the user (discoverable sign-in).
/// Keys print in sorted order (see ``jsonString(prettyPrinted:)``).
public struct AuthenticationResponseJSON: Hashable, Sendable, Codable {
    /// `AuthenticatorAssertionResponseJSON`.
    public struct Response: Hashable, Sendable, Codable {
        /// The client data JSON exactly as hashed for the authenticator.
        public var clientDataJSON: Base64URLBytes
        /// The signed authenticator data.
        public var authenticatorData: Base64URLBytes
        /// The DER ES256 signature over `authenticatorData ‖ SHA-256(clientDataJSON)`.
        public var signature: Base64URLBytes
        /// The user handle, when returned.
        public var userHandle: Base64URLBytes?
    }

    /// The credential ID, base64url.
    public var id: String
    /// The credential ID.
    public var rawId: Base64URLBytes
    /// `"public-key"`.
    public var type: String
    /// `"cross-platform"`: a hybrid authenticator is roaming.
    public var authenticatorAttachment: String?
    /// The assertion response.
    public var response: Response
    /// Client extension outputs (`{}`).
    public var clientExtensionResults: ClientExtensionResultsJSON

    /// Builds the JSON for a getAssertion response, as a browser does.
    ///
    /// - Parameters:
    ///   - response: the phone's decoded getAssertion response.
    ///   - clientDataJSON: the exact client data bytes whose hash the phone signed.
    ///   - credentialId: the credential to report when the response omits it (allowed when
    ///     the allow list had exactly one entry).
    ///   - clientExtensionResults: the extension outputs to report.
    /// - Throws: ``WebAuthnJSONError/Code/credentialMismatch`` when neither names a credential.
    public init(
        response: GetAssertionResponse,
        clientDataJSON: [UInt8],
        credentialId: [UInt8]? = nil,
        clientExtensionResults: ClientExtensionResultsJSON = ClientExtensionResultsJSON()
    ) throws(WebAuthnJSONError) {
        guard let id = response.credential?.id ?? credentialId else {
            throw WebAuthnJSONError(.credentialMismatch, "the assertion names no credential")
        }
        self.id = Base64URL.encode(id)
        self.rawId = Base64URLBytes(id)
        self.type = "public-key"
        self.authenticatorAttachment = "cross-platform"
        self.response = Response(
            clientDataJSON: Base64URLBytes(clientDataJSON),
            authenticatorData: Base64URLBytes(response.authData.bytes),
            signature: Base64URLBytes(response.signature),
            userHandle: response.user.map { Base64URLBytes($0.id) }
        )
        self.clientExtensionResults = clientExtensionResults
    }

    /// Reads the JSON back (for example what the desktop printed).
    public static func parse(_ json: some Collection<UInt8>) throws(WebAuthnJSONError) -> Self {
        try WebAuthnJSONCoding.decode(Self.self, from: json)
    }

    /// The JSON text: compact (one line) unless `prettyPrinted`; keys sorted at every level.
    public func jsonString(prettyPrinted: Bool = false) -> String {
        String(decoding: WebAuthnJSONCoding.encode(self, prettyPrinted: prettyPrinted), as: UTF8.self)
    }
}
