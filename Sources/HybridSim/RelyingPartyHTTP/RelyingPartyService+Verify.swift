import CTAP2
import Foundation
import HybridCore

/// The parts of a posted result, whichever form the profile uses.
struct PostedResult: Sendable {
    var clientDataJSON: [UInt8]
    var attestationObject: [UInt8]?
    var authenticatorData: [UInt8]?
    var signature: [UInt8]?
    var userHandle: [UInt8]?
    var rawId: [UInt8]?

    /// Reads the result from a body posted to `endpoint`: the `{credential}` object (WebAuthn L3
    /// `PublicKeyCredential` JSON, base64url), or Okta's `{clientData}`/`{attestation}` (standard
    /// base64; base64url is accepted too).
    init(body: [UInt8], endpoint: RelyingPartyProfile.Endpoint) throws(WebAuthnJSONError) {
        let document: JSONValue
        do {
            document = try JSONValue.read(body, subject: "the body is not JSON")
        } catch {
            throw WebAuthnJSONError(.invalidJSON, error.reason)
        }
        func member(_ token: String) -> (String, JSONValue?)? {
            if endpoint.body == .string("{\(token)}") { return ("the body", document) }
            for (key, value) in endpoint.body?.objectValue ?? [:] where value == .string("{\(token)}") {
                return (key, document[key])
            }
            return nil
        }
        func bytes(_ value: JSONValue?, _ path: String, optional: Bool = false) throws(WebAuthnJSONError) -> [UInt8]? {
            guard let value, value != .null else {
                if optional { return nil }
                throw WebAuthnJSONError(.missingMember, "\(path) is required")
            }
            guard let text = value.stringValue else { throw WebAuthnJSONError(.wrongType, "\(path) must be a string") }
            guard let decoded = Base64URL.decode(text) ?? Data(base64Encoded: text).map(Array.init) else {
                throw WebAuthnJSONError(.invalidBase64URL, "\(path) is neither base64url nor base64")
            }
            return decoded
        }
        if let (path, credential) = member("credential") {
            guard let credential, credential != .null else { throw WebAuthnJSONError(.missingMember, "\(path) is required") }
            guard credential.objectValue != nil else {
                throw WebAuthnJSONError(.wrongType, "\(path) must be a PublicKeyCredential object")
            }
            let response = credential["response"]
            guard response?.objectValue != nil else { throw WebAuthnJSONError(.missingMember, "response is required") }
            clientDataJSON = try bytes(response?["clientDataJSON"], "response.clientDataJSON") ?? []
            attestationObject = try bytes(response?["attestationObject"], "response.attestationObject", optional: true)
            authenticatorData = try bytes(response?["authenticatorData"], "response.authenticatorData", optional: true)
            signature = try bytes(response?["signature"], "response.signature", optional: true)
            userHandle = try bytes(response?["userHandle"], "response.userHandle", optional: true)
            rawId = try bytes(credential["rawId"], "rawId")
        } else if let (clientPath, clientData) = member("clientData"), let (attestationPath, attestation) = member("attestation") {
            clientDataJSON = try bytes(clientData, clientPath) ?? []
            attestationObject = try bytes(attestation, attestationPath)
        } else {
            throw WebAuthnJSONError(.invalidValue, "the profile's verify body has neither {credential} nor {clientData} and {attestation}")
        }
    }

    /// The result posted in `body` to `endpoint` and the challenge in its client data, or why
    /// neither can be read.
    static func read(_ body: [UInt8], endpoint: RelyingPartyProfile.Endpoint) -> Result<Read, WebAuthnJSONError> {
        Result { () throws(WebAuthnJSONError) in
            let posted = try PostedResult(body: body, endpoint: endpoint)
            return Read(posted: posted, challenge: try posted.challenge())
        }
    }

    /// A posted result and its challenge.
    struct Read: Sendable {
        var posted: PostedResult
        var challenge: [UInt8]
    }

    /// The challenge in the client data.
    func challenge() throws(WebAuthnJSONError) -> [UInt8] {
        guard let text = JSONValue.parse(clientDataJSON)?["challenge"]?.stringValue, let challenge = Base64URL.decode(text) else {
            throw WebAuthnJSONError(.clientDataMismatch, "clientDataJSON has no base64url challenge")
        }
        return challenge
    }
}

extension RelyingPartyService {
    /// Verifies a posted registration or authentication result, read from `request`'s body
    /// (``PostedResult/read(_:endpoint:)``) before it came to the actor.
    func finish(
        _ request: RelyingPartyHTTPRequest, _ read: Result<PostedResult.Read, WebAuthnJSONError>,
        _ ceremony: RelyingPartyProfile.Ceremony, registration: Bool
    ) -> RelyingPartyHTTPResponse {
        let label = registration ? "registration" : "sign-in"
        let posted: PostedResult
        let challenge: [UInt8]
        switch read {
        case .success(let read): (posted, challenge) = (read.posted, read.challenge)
        case .failure(let error): return reject(label, pending: false, 400, "\(error)")
        }
        // The session cookie first: a post without it (or with another session's) leaves the
        // challenge usable for the right one.
        if let session = pendingSession(challenge) {
            guard let cookie = Self.cookie(Self.cookieName, in: request.headers["cookie"] ?? "") else {
                return reject(
                    label, pending: false, 400,
                    "no \(Self.cookieName) cookie: the options response set one and this profile wants it back with the result")
            }
            guard cookie == session else { return reject(label, pending: false, 400, "the challenge belongs to another session") }
        }
        let entry: (user: PublicKeyCredentialUserEntity?, allowList: [[UInt8]], session: String?)
        switch takePending(challenge, registration: registration) {
        case .taken(let user, let allowList, let session):
            entry = (user, allowList, session)
        case .otherCeremony:
            let issued = registration ? "a sign-in" : "a registration"
            return reject(label, pending: false, 400, "the challenge \(Base64URL.encode(challenge)) was issued for \(issued); it stays usable there")
        case .spent(.used):
            return reject(
                label, pending: false, registration ? 400 : 401,
                "the challenge \(Base64URL.encode(challenge)) was already used: a result was posted with it before, and each is verified once (a replay?)")
        case .spent(.expired):
            return reject(
                label, pending: false, registration ? 400 : 401,
                "the challenge \(Base64URL.encode(challenge)) expired: it is usable for \(pendingLifetime) s after its options")
        case .unknown:
            return reject(
                label, pending: false, registration ? 400 : 401,
                "unknown challenge \(Base64URL.encode(challenge)): not issued by this server (or long gone)")
        }
        do {
            let (credential, attestation) = registration
                ? try verifyRegistration(posted, challenge: challenge, user: entry.user)
                : (try verifyAuthentication(posted, challenge: challenge, allowList: entry.allowList), nil)
            var updated = store
            updated.upsert(credential)
            try updated.save()
            store = updated
            let id = Base64URL.encode(credential.credentialId)
            // A full attestation says what it proved; other verdicts keep the line they always had.
            let proof = attestation.map { $0.type == .basic ? ", packed attestation: \($0.summary)" : "" } ?? ""
            logLine("accepted the \(label) of \(credential.userName ?? "a user") with credential \(id) (signCount \(credential.signCount)\(proof))")
            let values: [String: JSONValue] = [
                "credentialId": .string(id), "userId": .string(Base64URL.encode(credential.userId)),
                "user": .string(credential.userName ?? ""),
            ]
            let body = (try? ceremony.success.body?.substituting(values)) ?? nil
            return RelyingPartyHTTPResponse(
                status: ceremony.success.status.first ?? 200,
                body: body ?? .object(["verified": .bool(true), "credentialId": .string(id)]))
        } catch let error as RelyingPartyError {
            return reject(label, 400, error.description)
        } catch let error as WebAuthnJSONError {
            return reject(label, 400, error.description)
        } catch {
            return reject(label, 500, "cannot save the store: \(error)")
        }
    }

    /// A verdict against a result; `pending: false` when it names no challenge pending here for
    /// its ceremony and session (unreadable, unknown, spent, another ceremony's or session's): its
    /// line then goes through ``refusals``' budget, as a refused request's does, since anyone can
    /// post such results in a loop (about 600 of them, on a stderr nobody read, once stopped `rp`).
    private func reject(_ label: String, pending: Bool = true, _ status: Int, _ reason: String) -> RelyingPartyHTTPResponse {
        if pending { logLine("rejected a \(label): \(reason)") } else { refusals.note("rejected a \(label): \(reason)") }
        var response = RelyingPartyHTTPResponse.error(status, reason)
        response.isVerdict = true
        return response
    }

    private func verifyRegistration(
        _ posted: PostedResult, challenge: [UInt8], user: PublicKeyCredentialUserEntity?
    ) throws -> (RegisteredCredential, VerifiedAttestation?) {
        guard let user, let attestationBytes = posted.attestationObject else {
            throw WebAuthnJSONError(.missingMember, "response.attestationObject is required")
        }
        let attestation = try AttestationObject(bytes: attestationBytes)
        var statement: [String: CBORValue] = [:]
        for (key, value) in attestation.attStmt {
            guard let name = key.textValue else { throw WebAuthnJSONError(.invalidAttestation, "attStmt has a non-text key") }
            statement[name] = value
        }
        let authData: AuthenticatorData
        do {
            authData = try AuthenticatorData(bytes: attestation.authData)
        } catch {
            throw WebAuthnJSONError(.authenticatorDataMismatch, "authData: \(error)")
        }
        let response = MakeCredentialResponse(fmt: attestation.fmt, authData: authData, attStmt: statement)
        if let rawId = posted.rawId, rawId != authData.attestedCredentialData?.credentialId {
            throw WebAuthnJSONError(.credentialMismatch, "rawId is not the credential ID in the authenticator data")
        }
        let verified = try relyingParty.verifiedRegistration(
            response: response, clientDataJSON: posted.clientDataJSON, expectedChallenge: challenge, user: user,
            registeredCredentialIds: Set(currentCredentials.map(\.credentialId)), now: currentTime)
        return (verified.credential, verified.attestation)
    }

    private func verifyAuthentication(
        _ posted: PostedResult, challenge: [UInt8], allowList: [[UInt8]]
    ) throws -> RegisteredCredential {
        guard let authDataBytes = posted.authenticatorData, let signature = posted.signature, let rawId = posted.rawId else {
            throw WebAuthnJSONError(.missingMember, "response.authenticatorData, response.signature and rawId are required")
        }
        let authData: AuthenticatorData
        do {
            authData = try AuthenticatorData(bytes: authDataBytes)
        } catch {
            throw WebAuthnJSONError(.authenticatorDataMismatch, "authenticatorData: \(error)")
        }
        let response = GetAssertionResponse(
            credential: PublicKeyCredentialDescriptor(id: rawId), authData: authData, signature: signature,
            user: posted.userHandle.map { PublicKeyCredentialUserEntity(id: $0) })
        return try relyingParty.verifyAuthentication(
            response: response, clientDataJSON: posted.clientDataJSON, expectedChallenge: challenge,
            knownCredentials: currentCredentials, allowCredentials: allowList)
    }

    /// `name`'s value in a `Cookie` header.
    static func cookie(_ name: String, in header: String) -> String? {
        for pair in header.split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if parts.count == 2, parts[0] == name { return parts[1] }
        }
        return nil
    }
}
