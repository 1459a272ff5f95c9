import CTAP2
import Foundation
import HybridCore
import HybridSim

/// The result a client posts to `hybrid-sim rp` (`PostedResult` and the verification behind it:
/// the credential JSON or Okta's `{clientData, attestation}`, the attestation object, client data
/// and authenticator data, the assertion's signature), through `RelyingPartyService.handle`.
extension RelyingPartyServerTargets {
    /// Which ceremony an input posts a result for, from its first byte.
    enum Ceremony: Int, CaseIterable {
        case hankoRegistration, hankoSignIn, oktaRegistration

        var profile: RelyingPartyProfile { self == .oktaRegistration ? okta : hanko }
        var registration: Bool { self != .hankoSignIn }
        /// The headers the profile wants (Okta's `Accept` and `Authorization`).
        var headers: [String: String] { self == .oktaRegistration ? ["accept": "application/json", "authorization": "Bearer x"] : [:] }
        var endpoints: RelyingPartyProfile.Ceremony { (registration ? profile.registration : profile.authentication)! }
    }

    /// The passkey the sign-ins are checked against, registered with a deterministic software
    /// authenticator (which keeps it, to sign the seeds' assertions).
    static let known: (credential: RegisteredCredential, authenticator: SoftwareAuthenticator) = {
        var authenticator = SoftwareAuthenticator(random: .deterministic(seed: Array("hybrid-fuzz rp/phone".utf8)))
        let challenge = [UInt8](repeating: 7, count: 32)
        let clientDataJSON = CollectedClientData(type: .create, challenge: challenge, origin: origin, crossOrigin: false).json
        let user = PublicKeyCredentialUserEntity(id: Array("user-handle-alice".utf8), name: "alice", displayName: "Alice")
        let request = MakeCredentialRequest(
            clientDataHash: CollectedClientData.hash(ofJSON: clientDataJSON), rp: PublicKeyCredentialRpEntity(id: rpId, name: "Example"),
            user: user, pubKeyCredParams: [PublicKeyCredentialParameters(alg: .es256)], options: AuthenticatorOptions(rk: true, uv: true))
        let (bytes, _) = authenticator.handle(CTAP2Request.makeCredential(request).encode(), policy: .init(), now: now)
        let response = try! CTAP2Response(bytes: bytes).decodePayload(as: MakeCredentialResponse.self)
        let credential = try! RelyingParty(id: rpId, origin: origin).verifyRegistration(
            response: response, clientDataJSON: clientDataJSON, expectedChallenge: challenge, user: user, now: now)
        return (credential, authenticator)
    }()

    /// The service's answer to the options call, then to `body` posted as `ceremony`'s result; a
    /// fresh service each time (the same challenge, the known credential stored).
    static func verdict(_ ceremony: Ceremony, body: [UInt8]) -> (options: RelyingPartyHTTPResponse, verdict: RelyingPartyHTTPResponse) {
        let service = service(ceremony.profile, credentials: [known.credential])
        let options = ceremony.endpoints.options
        let optionsAnswer = RelyingPartyRequestProbe.wait {
            await service.handle(RelyingPartyHTTPRequest(
                method: options.method, target: options.path.replacingOccurrences(of: "{user}", with: "alice"), headers: ceremony.headers))
        }
        let verify = ceremony.endpoints.verify
        let verdict = RelyingPartyRequestProbe.wait {
            await service.handle(RelyingPartyHTTPRequest(method: verify.method, target: verify.path, headers: ceremony.headers, body: body))
        }
        return (optionsAnswer, verdict)
    }

    /// The challenge the options answer issued.
    static func challenge(_ options: RelyingPartyHTTPResponse, _ ceremony: Ceremony) -> [UInt8]? {
        let document = Array(options.body.data)
        if ceremony.registration {
            return try? PublicKeyCredentialCreationOptionsJSON.parse(
                document: document, userIdEncoding: ceremony.profile.userIdEncoding ?? .base64url).options.challenge.bytes
        }
        return try? PublicKeyCredentialRequestOptionsJSON.parse(document: document).options.challenge.bytes
    }

    /// A genuine result for `ceremony`, made by the known authenticator for the challenge its
    /// options issue, in the profile's body form.
    static func genuineResult(_ ceremony: Ceremony, attestation: SoftwareAuthenticator.Attestation = .none) -> [UInt8] {
        // A registration comes from another authenticator: the options exclude the known credential.
        var authenticator = ceremony.registration
            ? SoftwareAuthenticator(random: .deterministic(seed: Array("hybrid-fuzz rp/second phone".utf8))) : known.authenticator
        let options = verdict(ceremony, body: []).options
        let document = Array(options.body.data)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        if ceremony.registration {
            let parsed = try! PublicKeyCredentialCreationOptionsJSON.parse(
                document: document, userIdEncoding: ceremony.profile.userIdEncoding ?? .base64url).options
            let clientDataJSON = CollectedClientData(type: .create, challenge: parsed.challenge.bytes, origin: origin, crossOrigin: false).json
            let request = parsed.makeCredentialRequest(clientDataHash: CollectedClientData.hash(ofJSON: clientDataJSON), rpId: rpId)
            let (bytes, _) = authenticator.handle(CTAP2Request.makeCredential(request).encode(), policy: .init(attestation: attestation), now: now)
            let json = try! RegistrationResponseJSON(
                response: CTAP2Response(bytes: bytes).decodePayload(as: MakeCredentialResponse.self), clientDataJSON: clientDataJSON)
            if ceremony == .oktaRegistration {
                let body: JSONValue = .object([
                    "clientData": .string(Data(clientDataJSON).base64EncodedString()),
                    "attestation": .string(Data(json.response.attestationObject.bytes).base64EncodedString()),
                ])
                return Array(body.data)
            }
            return Array(try! encoder.encode(json))
        }
        let parsed = try! PublicKeyCredentialRequestOptionsJSON.parse(document: document).options
        let clientDataJSON = CollectedClientData(type: .get, challenge: parsed.challenge.bytes, origin: origin, crossOrigin: false).json
        let request = parsed.getAssertionRequest(clientDataHash: CollectedClientData.hash(ofJSON: clientDataJSON), rpId: rpId)
        let (bytes, _) = authenticator.handle(CTAP2Request.getAssertion(request).encode(), policy: .init(), now: now)
        let json = try! AuthenticationResponseJSON(
            response: CTAP2Response(bytes: bytes).decodePayload(as: GetAssertionResponse.self), clientDataJSON: clientDataJSON)
        return Array(try! encoder.encode(json))
    }

    /// Bytes of a result member, decoded as `rp` decodes them (base64url, else standard base64).
    static func decoded(_ value: JSONValue?) -> [UInt8]? {
        guard let text = value?.stringValue else { return nil }
        return Base64URL.decode(text) ?? Data(base64Encoded: text).map(Array.init)
    }

    /// Why an accepted result should not have been, checked apart from the service: its client
    /// data names the issued challenge, this origin and the ceremony's type, and a sign-in's
    /// signature verifies with the known credential's key over its authenticator data and client
    /// data hash. `nil` when it holds.
    static func acceptanceFault(_ ceremony: Ceremony, body: [UInt8], challenge: [UInt8]?) -> String? {
        guard let document = JSONValue.parse(body) else { return "the body is not JSON" }
        let response = document["response"]
        guard let clientDataJSON = decoded(ceremony == .oktaRegistration ? document["clientData"] : response?["clientDataJSON"]),
            let clientData = JSONValue.parse(clientDataJSON)
        else { return "no client data JSON" }
        guard let challenge, clientData["challenge"]?.stringValue.flatMap(Base64URL.decode) == challenge else {
            return "the client data's challenge is not the one issued"
        }
        guard clientData["origin"] == .string(origin) else { return "the client data's origin is not \(origin)" }
        guard clientData["type"] == .string(ceremony.registration ? "webauthn.create" : "webauthn.get") else {
            return "the client data's type is not the ceremony's"
        }
        guard !ceremony.registration else { return nil }
        guard let authenticatorData = decoded(response?["authenticatorData"]), let signature = decoded(response?["signature"]),
            let key = try? known.credential.coseKey()
        else { return "no authenticator data, signature or key" }
        do {
            try ES256.verify(
                signature: signature, authenticatorData: authenticatorData,
                clientDataHash: CollectedClientData.hash(ofJSON: clientDataJSON), publicKey: key)
        } catch {
            return "the signature does not verify: \(error)"
        }
        return nil
    }

    /// A posted result through `RelyingPartyService.handle`. The first input byte picks the
    /// ceremony (hanko registration, hanko sign-in, okta registration), the rest is the body.
    static let relyingPartyResult = FuzzTarget(
        "rp-result",
        "rp's verification of a posted result (credential JSON or Okta's clientData/attestation; attestation object, client data, authenticator data, signature) through RelyingPartyService.handle; refused only with a 4xx verdict, the same twice, accepted only for the issued challenge, this origin and (a sign-in) a signature the known key verifies",
        seeds: {
            Ceremony.allCases.map { [UInt8($0.rawValue)] + genuineResult($0) }
                + [[UInt8(Ceremony.hankoRegistration.rawValue)] + genuineResult(.hankoRegistration, attestation: .packedSelf)]
        }
    ) { input in
        guard let first = input.first else { return .rejected }
        let ceremony = Ceremony.allCases[Int(first) % Ceremony.allCases.count]
        let body = Array(input.dropFirst())
        let (options, verdict) = verdict(ceremony, body: body)
        let again = RelyingPartyServerTargets.verdict(ceremony, body: body).verdict
        guard again.status == verdict.status, again.body == verdict.body else {
            return .violation("\(verdict.status) then \(again.status) for \(input.fuzzHex)")
        }
        if (200..<300).contains(verdict.status) {
            if let fault = acceptanceFault(ceremony, body: body, challenge: challenge(options, ceremony)) {
                return .violation("accepted, but \(fault): \(input.fuzzHex)")
            }
            return .accepted
        }
        guard (400..<500).contains(verdict.status), verdict.body["verified"] == .bool(false), verdict.body["error"]?.stringValue != nil else {
            return .violation("refused with \(verdict.status) \(verdict.body.text): \(input.fuzzHex)")
        }
        return .rejected
    }
}
