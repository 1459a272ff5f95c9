import CTAP2
import Foundation
import HybridSim

/// The verifier's own reading of printed credential JSON (strict mirror types, exact member sets).
enum ResponseShape {
    static let topLevelMembers: Set<String> = [
        "id", "rawId", "type", "authenticatorAttachment", "response", "clientExtensionResults",
    ]
    static let registrationMembers: Set<String> = [
        "clientDataJSON", "attestationObject", "authenticatorData", "transports", "publicKey", "publicKeyAlgorithm",
    ]
    static let authenticationMembers: Set<String> = ["clientDataJSON", "authenticatorData", "signature", "userHandle"]

    struct Registration: Decodable {
        struct Response: Decodable {
            let clientDataJSON: String
            let attestationObject: String
            let authenticatorData: String
            let transports: [String]
            let publicKey: String?
            let publicKeyAlgorithm: Int
        }
        let id: String
        let rawId: String
        let type: String
        let authenticatorAttachment: String?
        let response: Response
    }

    struct Authentication: Decodable {
        struct Response: Decodable {
            let clientDataJSON: String
            let authenticatorData: String
            let signature: String
            let userHandle: String?
        }
        let id: String
        let rawId: String
        let type: String
        let authenticatorAttachment: String?
        let response: Response
    }

    /// Checks that the document and its `response` have exactly the expected members (those in
    /// `optional` may be absent), and that `clientExtensionResults` is an object.
    static func checkMembers(_ json: [UInt8], response: Set<String>, optional: Set<String>) throws(WebAuthnJSONError) {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(json))) as? [String: Any] else {
            throw WebAuthnJSONError(.invalidJSON, "the credential is not a JSON object")
        }
        try checkKeys(
            Set(object.keys), expected: topLevelMembers, optional: ["authenticatorAttachment"], where: "the credential")
        guard let inner = object["response"] as? [String: Any] else {
            throw WebAuthnJSONError(.wrongType, "response must be an object")
        }
        try checkKeys(Set(inner.keys), expected: response, optional: optional, where: "response")
        guard object["clientExtensionResults"] is [String: Any] else {
            throw WebAuthnJSONError(.wrongType, "clientExtensionResults must be an object")
        }
    }

    private static func checkKeys(
        _ keys: Set<String>, expected: Set<String>, optional: Set<String>, where place: String
    ) throws(WebAuthnJSONError) {
        if let extra = keys.subtracting(expected).sorted().first {
            throw WebAuthnJSONError(.invalidValue, "\(place) has an unexpected member \"\(extra)\"")
        }
        if let missing = expected.subtracting(optional).subtracting(keys).sorted().first {
            throw WebAuthnJSONError(.missingMember, "\(place) has no \"\(missing)\"")
        }
    }

    /// Decodes strictly unpadded base64url.
    static func bytes(_ text: String, _ member: String) throws(WebAuthnJSONError) -> [UInt8] {
        guard let bytes = Base64URL.decodeUnpadded(text) else {
            throw WebAuthnJSONError(.invalidBase64URL, "\(member) is not unpadded base64url")
        }
        return bytes
    }

    /// Checks `type`, `id` == `rawId` and the attachment; returns the credential ID.
    static func checkIdentity(id: String, rawId: String, type: String, attachment: String?) throws(WebAuthnJSONError)
        -> [UInt8]
    {
        guard type == "public-key" else {
            throw WebAuthnJSONError(.invalidValue, "type is \"\(type)\", expected \"public-key\"")
        }
        let credentialId = try bytes(rawId, "rawId")
        guard id == rawId, !credentialId.isEmpty else {
            throw WebAuthnJSONError(.credentialMismatch, "id and rawId differ or are empty")
        }
        if let attachment, attachment != "cross-platform" {
            throw WebAuthnJSONError(
                .invalidValue, "authenticatorAttachment is \"\(attachment)\", expected \"cross-platform\"")
        }
        return credentialId
    }

    /// Reads client data with `JSONSerialization` and checks type, challenge, origin, crossOrigin.
    static func checkClientData(_ json: [UInt8], type: String, expected: WebAuthnResponseVerifier.Expectation)
        throws(WebAuthnJSONError)
    {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(json))) as? [String: Any] else {
            throw WebAuthnJSONError(.clientDataMismatch, "clientDataJSON is not a JSON object")
        }
        guard let actualType = object["type"] as? String, actualType == type else {
            throw WebAuthnJSONError(
                .clientDataMismatch, "type is \(object["type"].map { "\($0)" } ?? "absent"), expected \(type)")
        }
        guard let challenge = object["challenge"] as? String,
            let challengeBytes = try? bytes(challenge, "challenge"), challengeBytes == expected.challenge
        else {
            throw WebAuthnJSONError(.clientDataMismatch, "challenge is not \(Base64URL.encode(expected.challenge))")
        }
        guard let origin = object["origin"] as? String, origin == expected.origin else {
            throw WebAuthnJSONError(
                .clientDataMismatch,
                "origin is \(object["origin"].map { "\($0)" } ?? "absent"), expected \(expected.origin)")
        }
        if let crossOrigin = object["crossOrigin"] {
            guard let flag = crossOrigin as? Bool, !flag else {
                throw WebAuthnJSONError(.clientDataMismatch, "crossOrigin is \(crossOrigin), expected false")
            }
        }
    }

    /// Parses authenticator data and checks rpIdHash, UP and (when required) UV.
    static func checkAuthenticatorData(
        _ bytes: [UInt8], expected: WebAuthnResponseVerifier.Expectation
    ) throws(WebAuthnJSONError) -> AuthenticatorData {
        let authData: AuthenticatorData
        do {
            authData = try AuthenticatorData(bytes: bytes)
        } catch {
            throw WebAuthnJSONError(.authenticatorDataMismatch, error.reason)
        }
        guard authData.rpIdHash == AuthenticatorData.rpIdHash(for: expected.rpId) else {
            throw WebAuthnJSONError(.authenticatorDataMismatch, "rpIdHash is not SHA-256(\"\(expected.rpId)\")")
        }
        guard authData.userPresent else {
            throw WebAuthnJSONError(.authenticatorDataMismatch, "the UP flag is clear")
        }
        if expected.requireUserVerification, !authData.userVerified {
            throw WebAuthnJSONError(.authenticatorDataMismatch, "the UV flag is clear")
        }
        return authData
    }
}
