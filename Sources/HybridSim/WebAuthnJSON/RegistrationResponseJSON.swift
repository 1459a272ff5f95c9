import CTAP2
import Foundation

/// `RegistrationResponseJSON` (WebAuthn L3 §5.1 `PublicKeyCredential.toJSON()` for a registration):
/// what the desktop prints after a verified makeCredential, for a relying party's
/// `verify_registration_response` / `verifyRegistrationResponse` to consume.
///
/// ```json
/// {"authenticatorAttachment": "cross-platform", "clientExtensionResults": {}, "id": "…", "rawId": "…",
///  "response": {"attestationObject": "…", "authenticatorData": "…", "clientDataJSON": "…",
///               "publicKey": "<SPKI DER>", "publicKeyAlgorithm": -7, "transports": ["hybrid", "internal"]},
///  "type": "public-key"}
/// ```
///
/// Keys print in sorted order (see ``jsonString(prettyPrinted:)``).
public struct RegistrationResponseJSON: Hashable, Sendable, Codable {
    /// `AuthenticatorAttestationResponseJSON`.
    public struct Response: Hashable, Sendable, Codable {
        /// The client data JSON exactly as hashed for the authenticator.
        public var clientDataJSON: Base64URLBytes
        /// The authenticator data (also inside ``attestationObject``).
        public var authenticatorData: Base64URLBytes
        /// `getTransports()`: sorted transport names.
        public var transports: [String]
        /// `getPublicKey()`: the credential key as DER SubjectPublicKeyInfo; absent for algorithms
        /// other than ES256.
        public var publicKey: Base64URLBytes?
        /// `getPublicKeyAlgorithm()`: the COSE algorithm of the credential key.
        public var publicKeyAlgorithm: Int
        /// CBOR `{"fmt", "attStmt", "authData"}` (text keys, CTAP2 canonical order).
        public var attestationObject: Base64URLBytes
    }

    /// The credential ID, base64url.
    public var id: String
    /// The credential ID.
    public var rawId: Base64URLBytes
    /// `"public-key"`.
    public var type: String
    /// `"cross-platform"`: a hybrid authenticator is roaming.
    public var authenticatorAttachment: String?
    /// The attestation response.
    public var response: Response
    /// Client extension outputs (`{}` unless `credProps` was answered).
    public var clientExtensionResults: ClientExtensionResultsJSON

    /// Builds the JSON for a makeCredential response, as a browser does.
    ///
    /// - Parameters:
    ///   - response: the phone's decoded makeCredential response.
    ///   - clientDataJSON: the exact client data bytes whose hash the phone signed.
    ///   - transports: what `getTransports()` reports; sorted on output.
    ///   - clientExtensionResults: the extension outputs to report.
    /// - Throws: ``WebAuthnJSONError/Code/authenticatorDataMismatch`` when the authenticator data has
    ///   no attested credential data.
    public init(
        response: MakeCredentialResponse,
        clientDataJSON: [UInt8],
        transports: [String] = ["hybrid", "internal"],
        clientExtensionResults: ClientExtensionResultsJSON = ClientExtensionResultsJSON()
    ) throws(WebAuthnJSONError) {
        guard let attested = response.authData.attestedCredentialData else {
            throw WebAuthnJSONError(.authenticatorDataMismatch, "a registration needs attested credential data (AT)")
        }
        let key = try? attested.coseKey()
        self.id = Base64URL.encode(attested.credentialId)
        self.rawId = Base64URLBytes(attested.credentialId)
        self.type = "public-key"
        self.authenticatorAttachment = "cross-platform"
        self.response = Response(
            clientDataJSON: Base64URLBytes(clientDataJSON),
            authenticatorData: Base64URLBytes(response.authData.bytes),
            transports: Array(Set(transports)).sorted(),
            publicKey: key.map { Base64URLBytes(Array($0.publicKey.derRepresentation)) },
            publicKeyAlgorithm: key != nil
                ? COSEAlgorithmIdentifier.es256.rawValue : Self.algorithm(ofCOSEKey: attested.credentialPublicKey),
            attestationObject: Base64URLBytes(Self.attestationObject(response))
        )
        self.clientExtensionResults = clientExtensionResults
    }

    /// The attestation object of a makeCredential response (WebAuthn L3 §6.5.4):
    /// canonical CBOR `{"fmt": tstr, "attStmt": map, "authData": bstr}`.
    public static func attestationObject(_ response: MakeCredentialResponse) -> [UInt8] {
        var attStmt: [CBORValue: CBORValue] = [:]
        for (key, value) in response.attStmt { attStmt[.text(key)] = value }
        return CBOR.encode(
            .map([
                .text("fmt"): .text(response.fmt),
                .text("attStmt"): .map(attStmt),
                .text("authData"): .bytes(response.authData.bytes),
            ]))
    }

    /// Reads the JSON back (for example what the desktop printed).
    public static func parse(_ json: some Collection<UInt8>) throws(WebAuthnJSONError) -> Self {
        try WebAuthnJSONCoding.decode(Self.self, from: json)
    }

    /// The JSON text: compact (one line) unless `prettyPrinted`; keys sorted at every level.
    public func jsonString(prettyPrinted: Bool = false) -> String {
        String(decoding: WebAuthnJSONCoding.encode(self, prettyPrinted: prettyPrinted), as: UTF8.self)
    }

    /// The `alg` (label 3) of a COSE_Key this module cannot decode, or 0 when it has none.
    private static func algorithm(ofCOSEKey bytes: [UInt8]) -> Int {
        let value = try? CBOR.decode(bytes, options: CBORDecodingOptions(requireCanonical: false))
        return value?[3]?.intValue ?? 0
    }
}
