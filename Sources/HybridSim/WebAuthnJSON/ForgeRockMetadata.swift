import CTAP2
import Foundation

/// ForgeRock AM's WebAuthn nodes: the `data` of the `MetadataCallback` they send (or the whole
/// authentication-tree callbacks document holding it), turned into WebAuthn L3 options JSON.
///
/// Members read, as ForgeRock's JavaScript SDK (`fr-webauthn`, `WebAuthnRegistrationMetadata` /
/// `WebAuthnAuthenticationMetadata`) names them: `_action` (`webauthn_registration` /
/// `webauthn_authentication`), `challenge` (standard base64), `relyingPartyName`, `_relyingPartyId`
/// or a plain `relyingPartyId`, `userId` (the SDK uses the characters of this base64 text as the user
/// handle, so its UTF-8 bytes are the handle), `userName`, `displayName`, `timeout`,
/// `attestationPreference`, `_pubKeyCredParams` / `_authenticatorSelection` (structured twins), or
/// `pubKeyCredParams` / `authenticatorSelection` when those strings are JSON, `userVerification`,
/// and `_allowCredentials` (`[{"type", "id": [signed bytes]}]`).
///
/// Unconfirmed (no primary source): the exact form of `_allowCredentials` ids, and older AM versions
/// whose `relyingPartyId`, `pubKeyCredParams` and `acceptableCredentials` strings are JavaScript
/// snippets rather than JSON (those are ignored: ES256 is assumed, the allow list left empty).
enum ForgeRockMetadata {
    /// The options as a bare WebAuthn JSON object, or `nil` when `object` is not ForgeRock metadata.
    static func options(from object: [String: Any]) throws(WebAuthnJSONError) -> [String: Any]? {
        guard let data = metadata(in: object), let action = data["_action"] as? String else { return nil }
        guard let challengeText = data["challenge"] as? String, let challenge = Self.base64(challengeText) else {
            throw WebAuthnJSONError(.missingChallenge, "the ForgeRock metadata has no base64 \"challenge\"")
        }
        var options: [String: Any] = ["challenge": Base64URL.encode(challenge)]
        // A number, as the SDK's metadata types have it; the digits of one in a string (the
        // metadata's other option members are strings) are read as that number, not dropped.
        if let text = data["timeout"] as? String {
            // Other text is no timeout: left out, as before (the wait is the default).
            let digits = text.trimmingCharacters(in: .whitespaces)
            if !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let number = Double(digits) {
                options["timeout"] = number
            }
        } else if let timeout = data["timeout"] as? Int {
            options["timeout"] = timeout
        }
        let rpId = (data["_relyingPartyId"] as? String) ?? (data["relyingPartyId"] as? String).flatMap(plainHost)
        switch action {
        case "webauthn_registration":
            guard let userId = data["userId"] as? String, let userName = data["userName"] as? String else {
                throw WebAuthnJSONError(.missingMember, "the ForgeRock registration metadata needs userId and userName")
            }
            var rp: [String: Any] = ["name": data["relyingPartyName"] as? String ?? rpId ?? ""]
            if let rpId { rp["id"] = rpId }
            options["rp"] = rp
            options["user"] = [
                "id": Base64URL.encode(Array(userId.utf8)), "name": userName,
                "displayName": data["displayName"] as? String ?? userName,
            ]
            options["pubKeyCredParams"] =
                data["_pubKeyCredParams"] as? [Any] ?? jsonValue(data["pubKeyCredParams"]) as? [Any]
                ?? [["type": "public-key", "alg": -7]]
            if let selection = data["_authenticatorSelection"] as? [String: Any]
                ?? jsonValue(data["authenticatorSelection"]) as? [String: Any]
            {
                options["authenticatorSelection"] = selection
            }
            if let attestation = data["attestationPreference"] as? String { options["attestation"] = attestation }
        case "webauthn_authentication":
            if let rpId { options["rpId"] = rpId }
            if let verification = data["userVerification"] as? String { options["userVerification"] = verification }
            if let allowed = data["_allowCredentials"] as? [[String: Any]] {
                options["allowCredentials"] = try allowed.enumerated().map { index, entry throws(WebAuthnJSONError) in
                    guard let bytes = entry["id"] as? [Int], bytes.allSatisfy({ (-128...255).contains($0) }) else {
                        throw WebAuthnJSONError(.wrongType, "_allowCredentials[\(index)].id must be an array of bytes")
                    }
                    return ["type": entry["type"] as? String ?? "public-key",
                            "id": Base64URL.encode(bytes.map { UInt8(truncatingIfNeeded: $0) })]
                }
            }
        default:
            throw WebAuthnJSONError(.invalidValue, "ForgeRock _action \(action) is neither webauthn_registration nor webauthn_authentication")
        }
        return options
    }

    /// Whether the ForgeRock metadata in `object` (callbacks or their `data`) says
    /// `supportsJsonResponse`: the node then takes the outcome as ``jsonOutcome(legacy:)``.
    static func supportsJSONResponse(_ object: [String: Any]) -> Bool {
        metadata(in: object)?["supportsJsonResponse"] as? Bool == true
    }

    /// The outcome for a node that supports a JSON response, as ForgeRock's SDKs send it:
    /// `{"authenticatorAttachment": "cross-platform", "legacyData": <the legacy outcome>}` (a phone
    /// over hybrid is a cross-platform authenticator).
    static func jsonOutcome(legacy: String) -> String {
        JSONValue.object(["authenticatorAttachment": .string("cross-platform"), "legacyData": .string(legacy)]).text
    }

    /// The metadata object: `object` itself, or the `data` output of the `MetadataCallback` in a
    /// callbacks document (`{"authId", "callbacks": [{"type": "MetadataCallback", "output": [{"name": "data", "value": {…}}]}]}`).
    private static func metadata(in object: [String: Any]) -> [String: Any]? {
        if object["_action"] is String { return object }
        guard let callbacks = object["callbacks"] as? [[String: Any]] else { return nil }
        for callback in callbacks where callback["type"] as? String == "MetadataCallback" {
            for output in callback["output"] as? [[String: Any]] ?? [] where output["name"] as? String == "data" {
                if let value = output["value"] as? [String: Any], value["_action"] is String { return value }
            }
        }
        return nil
    }

    /// Standard base64 with or without padding (base64url accepted too).
    private static func base64(_ text: String) -> [UInt8]? {
        Base64URL.decode(text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_"))
    }

    /// A string member that holds JSON (newer AM versions), parsed; `nil` for JavaScript snippets.
    private static func jsonValue(_ value: Any?) -> Any? {
        guard let text = value as? String else { return nil }
        return try? JSONSerialization.jsonObject(with: Data(text.utf8))
    }

    /// `example.com`, but not a JavaScript snippet such as `rpId: "example.com",`.
    private static func plainHost(_ text: String) -> String? {
        text.isEmpty || text.contains(where: { " :\",".contains($0) }) ? nil : text
    }
}

extension ForgeRockMetadata {
    /// The value ForgeRock's JavaScript SDK puts in the `webAuthnOutcome` hidden-value callback for
    /// a credential (`PublicKeyCredential` JSON as printed): registration
    /// `clientDataJSON::<attestationObject as comma-separated signed bytes>::<credential id>`,
    /// authentication `clientDataJSON::<authenticatorData signed bytes>::<signature signed bytes>::<credential id>`.
    /// The optional `::userHandle` and `::deviceName` suffixes are left out (their encoding is
    /// unconfirmed). `nil` when the JSON is not a credential.
    static func outcome(credentialJSON: String) -> String? {
        guard let credential = JSONValue.parse(Array(credentialJSON.utf8)), let id = credential["id"]?.stringValue,
            let response = credential["response"],
            let clientData = response["clientDataJSON"]?.stringValue.flatMap(Base64URL.decode)
        else { return nil }
        func signedBytes(_ member: String) -> String? {
            response[member]?.stringValue.flatMap(Base64URL.decode).map { bytes in
                bytes.map { String(Int8(bitPattern: $0)) }.joined(separator: ",")
            }
        }
        let text = String(decoding: clientData, as: UTF8.self)
        if let attestation = signedBytes("attestationObject") {
            return "\(text)::\(attestation)::\(id)"
        }
        guard let authData = signedBytes("authenticatorData"), let signature = signedBytes("signature") else { return nil }
        return "\(text)::\(authData)::\(signature)::\(id)"
    }
}
