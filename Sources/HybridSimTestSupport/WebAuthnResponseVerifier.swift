import CTAP2
import Foundation
import HybridSim

/// Checks printed WebAuthn credential JSON from the outside, the way a relying-party server would
/// receive it: independent of ``RegistrationResponseJSON``/``AuthenticationResponseJSON`` decoding
/// and of the desktop's ``HybridCore/RelyingParty`` check.
///
/// It reads the JSON with its own strict mirror types and checks the exact member sets, decodes
/// `clientDataJSON` with `JSONSerialization`, decodes `attestationObject` as canonical CBOR, parses
/// the authenticator data, and verifies signatures with swift-crypto (through ``CTAP2/ES256``).
/// Tests of the whole product use it to check what `hybrid-sim desktop` printed.
public enum WebAuthnResponseVerifier {
    /// What the relying party expects of a ceremony.
    public struct Expectation: Hashable, Sendable {
        /// The challenge it issued.
        public var challenge: [UInt8]
        /// Its origin, compared exactly.
        public var origin: String
        /// Its RP ID.
        public var rpId: String
        /// Whether UV must be set.
        public var requireUserVerification: Bool

        /// Creates an expectation.
        public init(challenge: [UInt8], origin: String, rpId: String, requireUserVerification: Bool = false) {
            self.challenge = challenge
            self.origin = origin
            self.rpId = rpId
            self.requireUserVerification = requireUserVerification
        }
    }

    /// What a verified registration JSON holds.
    public struct VerifiedRegistration: Hashable, Sendable {
        /// The credential ID.
        public var credentialId: [UInt8]
        /// The credential public key (from the attestation object).
        public var publicKey: COSEKey
        /// The same key as DER SubjectPublicKeyInfo (the `publicKey` member).
        public var publicKeySPKI: [UInt8]
        /// The signature counter.
        public var signCount: UInt32
        /// The authenticator data flags.
        public var flags: AuthenticatorDataFlags
        /// The attestation statement format.
        public var attestationFormat: String
        /// The reported transports.
        public var transports: [String]
    }

    /// What a verified authentication JSON holds.
    public struct VerifiedAuthentication: Hashable, Sendable {
        /// The credential ID.
        public var credentialId: [UInt8]
        /// The signature counter.
        public var signCount: UInt32
        /// The authenticator data flags.
        public var flags: AuthenticatorDataFlags
        /// The user handle, when present.
        public var userHandle: [UInt8]?
    }

    /// Verifies `RegistrationResponseJSON` text: shape, client data, attestation object, authenticator
    /// data, the credential key in both forms, and the attestation statement (`none`; `packed` self
    /// attestation verified with the credential key; `packed` full attestation verified with
    /// `x5c[0]`'s key, its certificate rules left to the relying party).
    ///
    /// - Throws: ``WebAuthnJSONError`` naming the first check that failed.
    public static func verifyRegistration(
        json: some Collection<UInt8>, expecting expected: Expectation
    ) throws(WebAuthnJSONError) -> VerifiedRegistration {
        let bytes = Array(json)
        try ResponseShape.checkMembers(bytes, response: ResponseShape.registrationMembers, optional: ["publicKey"])
        let credential = try WebAuthnJSONCoding.decode(ResponseShape.Registration.self, from: bytes)
        let credentialId = try ResponseShape.checkIdentity(
            id: credential.id, rawId: credential.rawId, type: credential.type,
            attachment: credential.authenticatorAttachment)
        let response = credential.response
        let clientDataJSON = try ResponseShape.bytes(response.clientDataJSON, "response.clientDataJSON")
        try ResponseShape.checkClientData(clientDataJSON, type: "webauthn.create", expected: expected)

        let attestation = try AttestationObject(
            bytes: ResponseShape.bytes(response.attestationObject, "response.attestationObject"))
        guard
            attestation.authData == (try ResponseShape.bytes(response.authenticatorData, "response.authenticatorData"))
        else {
            throw WebAuthnJSONError(
                .authenticatorDataMismatch, "response.authenticatorData differs from attestationObject.authData")
        }
        let authData = try ResponseShape.checkAuthenticatorData(attestation.authData, expected: expected)
        guard let attested = authData.attestedCredentialData else {
            throw WebAuthnJSONError(.authenticatorDataMismatch, "the AT flag is clear in a registration")
        }
        guard attested.credentialId == credentialId else {
            throw WebAuthnJSONError(.credentialMismatch, "rawId is not the credential ID in the authenticator data")
        }
        let key: COSEKey
        do {
            key = try attested.coseKey()
        } catch {
            throw WebAuthnJSONError(.credentialMismatch, "credential public key: \(error.reason)")
        }
        guard response.publicKeyAlgorithm == COSEAlgorithmIdentifier.es256.rawValue else {
            throw WebAuthnJSONError(
                .credentialMismatch, "publicKeyAlgorithm is \(response.publicKeyAlgorithm), the key is ES256 (-7)")
        }
        let spki = Array(key.publicKey.derRepresentation)
        guard let printedKey = response.publicKey, try ResponseShape.bytes(printedKey, "response.publicKey") == spki
        else {
            throw WebAuthnJSONError(.credentialMismatch, "response.publicKey is not the credential key as SPKI DER")
        }
        try attestation.verify(
            clientDataHash: CollectedClientData.hash(ofJSON: clientDataJSON), credentialKey: key)

        return VerifiedRegistration(
            credentialId: credentialId, publicKey: key, publicKeySPKI: spki, signCount: authData.signCount,
            flags: authData.flags, attestationFormat: attestation.fmt, transports: response.transports)
    }

    /// Verifies `AuthenticationResponseJSON` text: shape, client data, authenticator data, and the
    /// signature over `authenticatorData ‖ SHA-256(clientDataJSON)` with `publicKey`.
    ///
    /// - Parameters:
    ///   - credentialId: when given, `rawId` must be it.
    ///   - userHandle: when given and `userHandle` is present, it must be this.
    /// - Throws: ``WebAuthnJSONError`` naming the first check that failed.
    public static func verifyAuthentication(
        json: some Collection<UInt8>,
        publicKey: COSEKey,
        expecting expected: Expectation,
        credentialId expectedCredentialId: [UInt8]? = nil,
        userHandle expectedUserHandle: [UInt8]? = nil
    ) throws(WebAuthnJSONError) -> VerifiedAuthentication {
        let bytes = Array(json)
        try ResponseShape.checkMembers(bytes, response: ResponseShape.authenticationMembers, optional: ["userHandle"])
        let credential = try WebAuthnJSONCoding.decode(ResponseShape.Authentication.self, from: bytes)
        let credentialId = try ResponseShape.checkIdentity(
            id: credential.id, rawId: credential.rawId, type: credential.type,
            attachment: credential.authenticatorAttachment)
        if let expectedCredentialId, expectedCredentialId != credentialId {
            throw WebAuthnJSONError(
                .credentialMismatch, "rawId \(credential.rawId) is not \(Base64URL.encode(expectedCredentialId))")
        }
        let response = credential.response
        let clientDataJSON = try ResponseShape.bytes(response.clientDataJSON, "response.clientDataJSON")
        try ResponseShape.checkClientData(clientDataJSON, type: "webauthn.get", expected: expected)
        let authDataBytes = try ResponseShape.bytes(response.authenticatorData, "response.authenticatorData")
        let authData = try ResponseShape.checkAuthenticatorData(authDataBytes, expected: expected)
        guard authData.attestedCredentialData == nil else {
            throw WebAuthnJSONError(.authenticatorDataMismatch, "an assertion's authenticator data has the AT flag set")
        }
        let signature = try ResponseShape.bytes(response.signature, "response.signature")
        do {
            try ES256.verify(
                signature: signature, authenticatorData: authDataBytes,
                clientDataHash: CollectedClientData.hash(ofJSON: clientDataJSON), publicKey: publicKey)
        } catch {
            throw WebAuthnJSONError(.invalidSignature, error.reason)
        }
        let userHandle = try response.userHandle.map { text throws(WebAuthnJSONError) in
            try ResponseShape.bytes(text, "response.userHandle")
        }
        if let expectedUserHandle, let userHandle, userHandle != expectedUserHandle {
            throw WebAuthnJSONError(.credentialMismatch, "userHandle is not \(Base64URL.encode(expectedUserHandle))")
        }
        return VerifiedAuthentication(
            credentialId: credentialId, signCount: authData.signCount, flags: authData.flags, userHandle: userHandle)
    }
}
