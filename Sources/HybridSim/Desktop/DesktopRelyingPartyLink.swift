import CTAP2
import Foundation
import HybridCore

/// `desktop --rp-url`: the relying party over HTTP, as a profile describes it. The options come from
/// it, and the result goes back to it; its verdict decides the exit status.
struct DesktopRelyingPartyLink: Sendable {
    let client: RelyingPartyClient
    let ceremony: RelyingPartyProfile.Ceremony
    let registration: Bool
    /// `{user}`: `--user`, else `alice` for a registration and empty (a discoverable sign-in) otherwise.
    let user: String
    let tamper: Bool
    /// `--user` was given but the profile's options call has no `{user}` to carry it.
    let userDropped: Bool

    /// The longest one HTTP call to the relying party may take, unless `--timeout` is shorter.
    static let callLimit: Duration = .seconds(30)
    /// The longest its connection may take.
    static let connectLimit: Duration = .seconds(5)

    init(configuration: DesktopConfiguration) throws(ProgramFailure) {
        guard let url = configuration.rpURL, let name = configuration.rpProfile else {
            throw ProgramFailure(.badInput, "--rp-url and --rp-profile go together")
        }
        let profile = try RelyingPartyProfile.load(name)
        registration = configuration.request == .makeCredential
        ceremony = try profile.ceremony(registration: registration)
        // Each call takes at most 30 s (5 s to connect), and no more than `--timeout`.
        let limit = min(configuration.timeout ?? Self.callLimit, Self.callLimit)
        client = try RelyingPartyClient(
            baseURL: url, profile: profile, extraHeaders: configuration.rpHeaders, environment: configuration.environment,
            timeout: limit, connectTimeout: min(limit, Self.connectLimit),
            tls: try RelyingPartyTLS.configuration(caFile: configuration.rpCA, environment: configuration.environment))
        user = configuration.userName ?? (registration ? ProgramDefaults.userName : "")
        tamper = configuration.tamperWithResult
        // The name may go with the options call or the result (a custom profile's verify body).
        let takesUser = [ceremony.options, ceremony.verify].contains { $0.placeholders.contains("user") }
        userDropped = configuration.userName != nil && !takesUser
    }

    /// The profile's `user.id` encoding, unless `--user-id-encoding` says otherwise.
    var userIdEncoding: UserIdEncoding? { client.profile.userIdEncoding }

    /// Where the options come from, e.g. `POST http://127.0.0.1:47003/generate-registration-options`.
    func optionsSource() throws(ProgramFailure) -> String {
        "\(ceremony.options.method) \(try client.url(ceremony.options, values: ["user": .string(user)]))"
    }

    /// Fetches the options document.
    func fetchOptions() async throws(ProgramFailure) -> DesktopCeremony.OptionsDocument {
        let bytes = try await client.fetchOptions(ceremony, values: ["user": .string(user)])
        return DesktopCeremony.OptionsDocument(bytes: bytes, source: try optionsSource(), fetched: true)
    }

    /// Posts the credential JSON in the profile's form and returns the verdict.
    func submit(credentialJSON: String) async throws(ProgramFailure) -> RelyingPartyClient.Verdict {
        guard var credential = JSONValue.parse(Array(credentialJSON.utf8)) else {
            throw ProgramFailure(.failed, "the credential JSON does not parse")
        }
        if tamper { credential = Self.tampered(credential) }
        let response = credential["response"]
        func standardBase64(_ member: String) -> JSONValue {
            guard let text = response?[member]?.stringValue, let bytes = Base64URL.decode(text) else { return .null }
            return .string(Data(bytes).base64EncodedString())
        }
        let values: [String: JSONValue] = [
            "user": .string(user), "credential": credential, "credentialId": credential["id"] ?? .null,
            "clientData": standardBase64("clientDataJSON"), "attestation": standardBase64("attestationObject"),
        ]
        return try await client.submit(ceremony, values: values)
    }

    /// Where the result goes, e.g. `POST http://127.0.0.1:47003/verify-registration`.
    func verifySource() -> String {
        "\(ceremony.verify.method) \((try? client.url(ceremony.verify, values: ["user": .string(user)])) ?? ceremony.verify.path)"
    }

    /// The result with one thing changed that every relying party must notice: the challenge in
    /// the client data of a registration (`none` attestation signs nothing), the last byte of an
    /// assertion's signature.
    static func tampered(_ credential: JSONValue) -> JSONValue {
        guard case .object(var members) = credential, case .object(var response)? = members["response"] else {
            return credential
        }
        if let signature = response["signature"]?.stringValue, var bytes = Base64URL.decode(signature), !bytes.isEmpty {
            bytes[bytes.count - 1] ^= 0x01
            response["signature"] = .string(Base64URL.encode(bytes))
        } else if let text = response["clientDataJSON"]?.stringValue, let bytes = Base64URL.decode(text),
            case .object(var clientData)? = JSONValue.parse(bytes),
            let challenge = clientData["challenge"]?.stringValue, var raw = Base64URL.decode(challenge), !raw.isEmpty
        {
            raw[0] ^= 0x01
            clientData["challenge"] = .string(Base64URL.encode(raw))
            response["clientDataJSON"] = .string(Base64URL.encode(Array(JSONValue.object(clientData).data)))
        }
        members["response"] = .object(response)
        return .object(members)
    }
}

// MARK: - Narration

extension DesktopRelyingPartyLink {
    /// Fetches the options, saying where from.
    func fetchOptions(narrator: DesktopNarrator) async throws(ProgramFailure) -> DesktopCeremony.OptionsDocument {
        if userDropped {
            // Said, not refused: the server decides which passkeys may answer (Hanko's sign-in is discoverable).
            narrator.say(
                "note: the \(client.profile.name) profile's \(registration ? "registration" : "sign-in") calls take no account name; --user is not sent, and the relying party's options decide which passkeys may answer")
        }
        narrator.say("options: fetching them with \(try optionsSource()) (profile \(client.profile.name))")
        return try await fetchOptions()
    }

    /// Says which shape foreign options had, and what of them was ignored; `userIdEncodingGiven`:
    /// whether `--user-id-encoding` (or the profile) chose how `user.id` is read.
    static func describeShape(of ceremony: DesktopCeremony, userIdEncodingGiven: Bool, narrator: DesktopNarrator) {
        guard let (shape, ignored) = ceremony.optionsShape else { return }
        let extra = ignored.isEmpty ? "" : " (ignored beside it: \(ignored.joined(separator: ", ")))"
        narrator.say("options: recognised \(shape.summary)\(extra)")
        narrator.event("options", [("shape", .string(shape.rawValue))])
        if shape == .options, !userIdEncodingGiven, case .registration(let creation) = ceremony.options {
            // Okta's shape. Its user.id read as base64url parsed, but Okta's own sample reads the
            // text's characters: never guessed, only pointed out.
            narrator.say(
                "note: {\"options\": …} is Okta's shape; user.id was read as base64url (\(creation.user.id.bytes.count) bytes), while Okta's iOS sample uses the UTF-8 of its text: give --user-id-encoding utf8 to do the same")
        }
        if case .registration(let creation) = ceremony.options, creation.authenticatorSelection?.authenticatorAttachment == "platform" {
            // Chrome offers only its own platform authenticator for these; a phone is cross-platform.
            narrator.say(
                "note: the options ask for a platform authenticator (authenticatorAttachment \"platform\"); a browser would not offer a phone over hybrid for them, the simulated one answers anyway (its credential reports \"cross-platform\")")
        }
        if ceremony.originDerived {
            // A browser takes the origin from the page, and refuses an RP ID that does not fit it.
            narrator.say(
                "note: the origin \(ceremony.origin) is made from the RP ID (no --origin); give --origin with your relying party's page origin to check the RP ID against it, as a browser does")
        }
    }

    /// For options read from ForgeRock callbacks: the `webAuthnOutcome` value to put in the tree's
    /// hidden-value callback, on stderr and as a `forgeRockOutcome` event.
    static func describeOutcome(_ result: DesktopResult, of ceremony: DesktopCeremony, narrator: DesktopNarrator) {
        guard ceremony.optionsShape?.shape == .forgeRock,
            let legacy = ForgeRockMetadata.outcome(credentialJSON: result.credentialJSON)
        else { return }
        let outcome = ceremony.forgeRockJSONResponse ? ForgeRockMetadata.jsonOutcome(legacy: legacy) : legacy
        narrator.say("ForgeRock webAuthnOutcome (the HiddenValueCallback's value): \(outcome)")
        narrator.event("forgeRockOutcome", [("value", .string(outcome))])
    }

    /// What a verdict that is not a success means: a rejection (`verificationFailed`, exit 5, with
    /// the success rule's reason when the status was a success status), or, for a 5xx, the server
    /// failing (`failed`, exit 1): a CI run must tell a crash from a verdict on the credential.
    static func failure(_ verdict: RelyingPartyClient.Verdict, what: String, source: String) -> ProgramFailure {
        let answered = "(\(source) answered HTTP \(verdict.status)): \(verdict.body)"
        if (500...599).contains(verdict.status) {
            return ProgramFailure(.failed, "the relying party failed while verifying the \(what) \(answered)")
        }
        return ProgramFailure(
            .verificationFailed, "the relying party rejected the \(what) \(answered)" + (verdict.why.map { " (\($0))" } ?? ""))
    }

    /// Posts the result; throws `verificationFailed` (exit 5) when the relying party rejects it.
    func confirm(_ result: DesktopResult, narrator: DesktopNarrator) async throws(ProgramFailure) {
        if tamper { narrator.say("note: --debug-tamper-result: corrupting the result before posting it") }
        let verdict = try await submit(credentialJSON: result.credentialJSON)
        narrator.event(
            "rpVerdict",
            [("accepted", .bool(verdict.accepted)), ("status", .int(verdict.status)), ("body", .string(verdict.body))])
        let what = registration ? "registration" : "sign-in"
        guard verdict.accepted else { throw Self.failure(verdict, what: what, source: verifySource()) }
        narrator.say("relying party accepted the \(what): HTTP \(verdict.status) \(verdict.body)")
    }
}
