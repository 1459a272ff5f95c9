import CTAP2
import Foundation
import HybridCore
import HybridRuntime
import NIOCore

/// The browser-and-relying-party half of one desktop ceremony: WebAuthn options in (a real relying
/// party's, or the built-in one's), a CTAP2 request out; the phone's answer in, a verified
/// `PublicKeyCredential` JSON out.
///
/// The built-in relying party is just a source of options, so both paths run the same code:
/// ``init(configuration:store:challenge:)`` turns options into client data and a CTAP2 request the
/// way Chrome does (`WebAuthnOptions+CTAP2.swift`), and ``finish(response:store:now:)`` checks the
/// answer with ``RelyingParty`` against the relying-party store.
struct DesktopCeremony: Sendable {
    enum Options: Sendable {
        case registration(PublicKeyCredentialCreationOptionsJSON)
        case authentication(PublicKeyCredentialRequestOptionsJSON)
    }

    /// The options in effect.
    let options: Options
    /// Whether they came from `--options` (a foreign relying party).
    let foreign: Bool
    /// The RP ID in effect.
    let rpId: String
    /// The origin in effect.
    let origin: String
    /// The client data the phone signs over.
    let clientData: CollectedClientData
    /// `command ‖ CBOR`.
    let requestBytes: [UInt8]
    /// The relying-party check.
    let relyingParty: RelyingParty
    /// The wait for the phone in effect.
    let timeout: Duration
    /// The attestation conveyance in effect (`none`, `indirect`, `direct`, `enterprise`).
    let attestationConveyance: String
    /// How a foreign options document was shaped, and what of it was ignored (for a note).
    let optionsShape: (shape: WebAuthnOptionsShape, ignored: [String])?
    /// The origin was made from the RP ID (`https://<RP ID>`), not given with `--origin`.
    let originDerived: Bool
    /// ForgeRock metadata said `supportsJsonResponse`: its `webAuthnOutcome` is the JSON object.
    let forgeRockJSONResponse: Bool

    /// An options document from a relying party: a file's or an HTTP answer's bytes.
    struct OptionsDocument: Sendable {
        var bytes: [UInt8]
        /// Where it came from, for messages (`options.json`, `POST https://…`).
        var source: String
        /// Fetched from the relying party (`--rp-url`): options of the other ceremony mean the
        /// profile names the wrong endpoint, not that `--request` is wrong (it chose the endpoint).
        var fetched = false

        /// What to do about options that are `their` ceremony's, not the one asked for.
        func otherCeremonyAdvice(their: QRPayload.RequestType) -> String {
            let asked = their == .makeCredential ? "sign-in" : "registration"
            if fetched {
                return "the relying party's \(asked) endpoint sent them: check the --rp-profile's \(asked) paths"
            }
            return their == .makeCredential ? "give --request mc to register with them" : "give --request ga to sign in with them"
        }
    }

    /// The challenge.
    var challenge: [UInt8] { clientData.challenge }

    /// The QR code's request-type hint.
    var requestType: QRPayload.RequestType {
        switch options {
        case .registration: return .makeCredential
        case .authentication: return .getAssertion
        }
    }

    /// Allowed credential IDs (authentication), empty for a discoverable sign-in.
    var allowCredentialIds: [[UInt8]] {
        if case .authentication(let options) = options { return options.allowCredentialIds }
        return []
    }

    /// Builds the ceremony for `configuration`, reading `--options` if given.
    ///
    /// - Throws: ``ProgramFailure`` `badInput` for an unreadable or invalid options file or
    ///   settings that contradict it.
    init(
        configuration: DesktopConfiguration, store: RelyingPartyStore, challenge: [UInt8],
        document: OptionsDocument? = nil, attestationTrustAnchors: AttestationTrustAnchors? = nil
    ) throws(ProgramFailure) {
        let fallbackRpId =
            configuration.rpId
            ?? configuration.origin.flatMap(WebOrigin.host(of:)) ?? ProgramDefaults.rpId
        let options: Options
        var document = document
        if document == nil, let path = configuration.optionsFile { document = try Self.readFile(path) }
        if let document {
            let parsed = try Self.parseOptions(
                document, request: configuration.request, userIdEncoding: configuration.userIdEncoding ?? .base64url)
            options = parsed.options
            optionsShape = (parsed.shape, parsed.ignored)
            forgeRockJSONResponse = parsed.forgeRockJSONResponse
            foreign = true
        } else {
            optionsShape = nil
            forgeRockJSONResponse = false
            options = try Self.builtInOptions(
                configuration: configuration,
                rpId: fallbackRpId,
                store: store,
                challenge: challenge
            )
            foreign = false
        }

        // The RP ID: the options' (when they name one), which --rp-id may only repeat.
        let optionsRpId: String?
        switch options {
        case .registration(let creation): optionsRpId = creation.rp.id
        case .authentication(let request): optionsRpId = request.rpId
        }
        // The same host written two ways (`bücher.example`, `xn--bcher-kva.example`) is no
        // contradiction: the form check below says which to write.
        if let optionsRpId, let given = configuration.rpId, given != optionsRpId,
            WebOrigin.asciiForm(ofHost: given) != WebOrigin.asciiForm(ofHost: optionsRpId)
        {
            throw ProgramFailure(.badInput, "--rp-id \(given) contradicts the options' RP ID \(optionsRpId)")
        }
        let rpId = optionsRpId ?? fallbackRpId
        if let problem = WebOrigin.rpIdFormProblem(rpId) {
            // Said before the origin check, whose "RP ID X is not valid for origin https://x" would
            // contradict itself: a browser's origin host is lower case and punycode.
            throw ProgramFailure(.badInput, problem)
        }
        let origin = configuration.origin ?? "https://\(rpId)"
        self.originDerived = configuration.origin == nil
        guard let host = WebOrigin.host(of: origin), host == rpId || host.hasSuffix("." + rpId) else {
            throw ProgramFailure(
                .badInput,
                "RP ID \(rpId) is not valid for origin \(origin): it must be the origin's host or a parent domain of it"
            )
        }
        // A browser makes no WebAuthn request from an origin whose host is an IP address: its
        // effective domain is not a valid domain (WebAuthn L3 §5.1.3 step 7, a SecurityError;
        // Chromium's OriginAllowedToMakeWebAuthnRequests, kInvalidDomain).
        if Self.isIPAddress(host) {
            throw ProgramFailure(
                .badInput,
                "the origin \(origin) has an IP address for its host, and a browser makes no WebAuthn request from such a page "
                    + "(its effective domain is not a valid domain: a SecurityError); serve the page from a host name "
                    + "(localhost works)")
        }
        self.rpId = rpId
        self.origin = origin

        var relyingParty: RelyingParty
        switch options {
        case .registration(let creation):
            clientData = CollectedClientData(type: .create, challenge: creation.challenge.bytes, origin: origin)
            requestBytes = CTAP2Request.makeCredential(
                creation.makeCredentialRequest(clientDataHash: clientData.hash, rpId: rpId)
            ).encode()
            relyingParty = creation.relyingParty(origin: origin)
            attestationConveyance = creation.effectiveAttestation
            timeout = configuration.timeout ?? Self.timeout(milliseconds: creation.timeout)
        case .authentication(let request):
            clientData = CollectedClientData(type: .get, challenge: request.challenge.bytes, origin: origin)
            requestBytes = CTAP2Request.getAssertion(
                request.getAssertionRequest(clientDataHash: clientData.hash, rpId: rpId)
            ).encode()
            relyingParty = request.relyingParty(origin: origin)
            attestationConveyance = "none"
            timeout = configuration.timeout ?? Self.timeout(milliseconds: request.timeout)
        }
        // The relying party's ID is the one in effect even when the options left it out.
        relyingParty.id = rpId
        relyingParty.attestationTrustAnchors = attestationTrustAnchors
        self.relyingParty = relyingParty
        self.options = options
    }

    /// The built-in relying party's options: a fresh challenge, ES256, a discoverable credential,
    /// `direct` attestation (so the phone's `--attestation` shows), and for a registration the user
    /// handle already stored for that account name (a new passkey replaces the old one on the phone).
    private static func builtInOptions(
        configuration: DesktopConfiguration,
        rpId: String,
        store: RelyingPartyStore,
        challenge: [UInt8]
    ) throws(ProgramFailure) -> Options {
        let timeout = Int((configuration.timeout?.secondsValue ?? ProgramDefaults.timeoutSeconds) * 1000)
        switch configuration.request {
        case .makeCredential:
            let name = configuration.userName ?? ProgramDefaults.userName
            let userId = store.credentials(rpId: rpId, userName: name).first?.userId ?? RandomSource.system.bytes(16)
            return .registration(
                PublicKeyCredentialCreationOptionsJSON(
                    rp: PublicKeyCredentialRpEntityJSON(id: rpId, name: rpId),
                    user: PublicKeyCredentialUserEntityJSON(id: userId, name: name, displayName: name),
                    challenge: challenge,
                    timeout: timeout,
                    authenticatorSelection: AuthenticatorSelectionCriteriaJSON(
                        residentKey: "required",
                        userVerification: "preferred"
                    ),
                    attestation: "direct"
                )
            )
        case .getAssertion:
            // `--user`: a username-first sign-in, allowing only that account's credentials.
            var allowList: [PublicKeyCredentialDescriptorJSON]? = nil
            if let name = configuration.userName {
                let stored = store.credentials(rpId: rpId, userName: name)
                guard !stored.isEmpty else {
                    throw ProgramFailure(
                        .badInput,
                        "\(store.path) has no credential for \(name) @ \(rpId); register it with --request mc --user \(name)")
                }
                allowList = stored.map { PublicKeyCredentialDescriptorJSON(id: $0.credentialId, transports: ["hybrid", "internal"]) }
            }
            return .authentication(
                PublicKeyCredentialRequestOptionsJSON(
                    challenge: challenge,
                    timeout: timeout,
                    rpId: rpId,
                    allowCredentials: allowList,
                    userVerification: "preferred"
                )
            )
        }
    }

    private static func readFile(_ path: String) throws(ProgramFailure) -> OptionsDocument {
        do {
            return OptionsDocument(bytes: try InputFile.read(path), source: path == "-" ? "standard input" : path)
        } catch {
            throw ProgramFailure(.badInput, "cannot read the options \(path == "-" ? "from standard input" : "file \(path)"): \(error.reason)")
        }
    }

    /// Reads options in any shape relying parties send (bare, `publicKey` or `options` wrapper).
    private static func parseOptions(
        _ document: OptionsDocument, request: QRPayload.RequestType, userIdEncoding: UserIdEncoding
    ) throws(ProgramFailure) -> (options: Options, shape: WebAuthnOptionsShape, ignored: [String], forgeRockJSONResponse: Bool) {
        let path = document.source
        let bytes = document.bytes
        do {
            switch request {
            case .makeCredential:
                let parsed = try PublicKeyCredentialCreationOptionsJSON.parse(document: bytes, userIdEncoding: userIdEncoding)
                return (.registration(parsed.options), parsed.shape, parsed.ignoredSiblings, parsed.forgeRockJSONResponse)
            case .getAssertion:
                // Registration options hold every member sign-in options need, so they would run as
                // a sign-in with their rp, user and key types silently dropped: the --request is wrong.
                // Judged by their members, valid or not (no ES256, an Okta or ForgeRock user.id).
                let members = WebAuthnOptionsDocument.registrationMembers(bytes)
                if !members.isEmpty {
                    throw ProgramFailure(
                        .badInput,
                        "\(path) holds registration options (\(members.joined(separator: ", ")): PublicKeyCredentialCreationOptionsJSON), "
                            + "not sign-in options: \(document.otherCeremonyAdvice(their: .makeCredential))")
                }
                let parsed = try PublicKeyCredentialRequestOptionsJSON.parse(document: bytes)
                return (.authentication(parsed.options), parsed.shape, parsed.ignoredSiblings, parsed.forgeRockJSONResponse)
            }
        } catch let failure as ProgramFailure {
            throw failure
        } catch {
            let kind =
                request == .makeCredential
                ? "PublicKeyCredentialCreationOptionsJSON (--request mc)"
                : "PublicKeyCredentialRequestOptionsJSON (--request ga)"
            var hint =
                request == .makeCredential && WebAuthnOptionsDocument.registrationMembers(bytes).isEmpty
                    && (try? PublicKeyCredentialRequestOptionsJSON.parse(document: bytes)) != nil
                ? " (they read as sign-in options: \(document.otherCeremonyAdvice(their: .getAssertion)))" : ""
            if request == .makeCredential, userIdEncoding == .base64url,
                let failure = error as? WebAuthnJSONError, failure.code == .invalidBase64URL, "\(failure)".contains("user.id"),
                (try? PublicKeyCredentialCreationOptionsJSON.parse(document: bytes, userIdEncoding: .utf8)) != nil
            {
                // The decoding error already says which rule the text breaks (Base64URL.problem).
                hint =
                    failure.reason.contains("standard base64")
                    ? " (it is standard base64, with + or /: the relying party should send base64url, as WebAuthn's JSON "
                        + "forms do; --user-id-encoding utf8 would register the text's own bytes, another user handle)"
                    : " (they parse when user.id is read as plain text, as Okta and ForgeRock send it: give --user-id-encoding utf8)"
            }
            throw ProgramFailure(.badInput, "\(path) is not valid \(kind): \(error)\(hint)")
        }
    }

    /// The options' timeout hint (milliseconds) as the wait for the phone: 120 s when absent, 1 s … 1 h.
    private static func timeout(milliseconds: Int?) -> Duration {
        guard let milliseconds else { return .seconds(ProgramDefaults.timeoutSeconds) }
        let clamped = min(max(milliseconds, 1000), Int(ProgramDefaults.maximumTimeoutSeconds * 1000))
        return .milliseconds(clamped)
    }

    // MARK: - Describing

    /// "registration of alice @ example.com (origin https://example.com, challenge …)".
    var summary: String {
        let challenge = Base64URL.encode(clientData.challenge)
        switch options {
        case .registration(let creation):
            let source = foreign ? "options from \(creation.rp.name ?? rpId)" : "built-in relying party"
            return
                "registration of \(creation.user.name) @ \(rpId) (\(source), origin \(origin), challenge \(challenge))"
        case .authentication(let request):
            let source = foreign ? "options from the relying party" : "built-in relying party"
            let allow =
                request.allowCredentialIds.isEmpty
                ? "any passkey for \(rpId)" : "\(request.allowCredentialIds.count) allowed credential(s)"
            return "sign-in to \(rpId) with \(allow) (\(source), origin \(origin), challenge \(challenge))"
        }
    }

    // MARK: - Finishing

    /// Checks the phone's answer, updates `store` (not saved) and returns the result.
    ///
    /// - Throws: ``ProgramFailure`` `refused` (a CTAP2 error status), `protocolError` (unparsable
    ///   response, or a new credential's key a browser cannot read) or `verificationFailed` (the
    ///   relying-party check failed).
    func finish(
        response bytes: [UInt8],
        store: inout RelyingPartyStore,
        now: UInt64
    ) throws(ProgramFailure) -> DesktopResult {
        switch options {
        case .registration(let creation):
            var response = try Self.answer(command: "makeCredential", rpId: rpId) { () throws(Ceremony.Failure) in
                try Ceremony.makeCredentialPayload(bytes)
            }
            var notes: [String] = []
            if attestationConveyance == "none", response.fmt != "none" {
                // What a browser does for attestation "none": drop the statement, zero the AAGUID (packed-x5c's isn't).
                notes.append("attestation \"none\" requested: replaced the phone's \(response.fmt) statement with none")
                do {
                    response = .none(authData: try response.authData.zeroingAAGUID())
                } catch {
                    throw ProgramFailure(.protocolError, "cannot zero the AAGUID of the phone's authenticator data (attestation \"none\"): \(error)")
                }
            }
            let verified: VerifiedRegistration
            do {
                verified = try relyingParty.verifiedRegistration(
                    response: response,
                    clientDataJSON: clientData.json,
                    expectedChallenge: clientData.challenge,
                    user: creation.userEntity,
                    registeredCredentialIds: Set(store.credentials.map(\.credentialId)),
                    now: now
                )
            } catch {
                throw ProgramFailure(.verificationFailed, "the relying party rejected the registration: \(error)")
            }
            let credential = verified.credential
            let json: RegistrationResponseJSON
            do {
                json = try RegistrationResponseJSON(
                    response: response, clientDataJSON: clientData.json, clientExtensionResults: creation.clientExtensionResults)
            } catch {
                throw ProgramFailure(.protocolError, "cannot express the registration as JSON: \(error)")
            }
            store.upsert(credential)
            return result(
                .makeCredential, json: (json.jsonString(), json.jsonString(prettyPrinted: true)),
                credentialId: credential.credentialId, credential: credential, previousSignCount: nil, check: .verified,
                notes: notes, attestation: verified.attestation)

        case .authentication:
            let response = try Self.payload(
                bytes, as: GetAssertionResponse.self, command: "getAssertion", rpId: rpId, allowed: allowCredentialIds.count)
            let allowList = allowCredentialIds
            let fallbackId = allowList.count == 1 ? allowList[0] : nil
            let json: AuthenticationResponseJSON
            do {
                json = try AuthenticationResponseJSON(
                    response: response,
                    clientDataJSON: clientData.json,
                    credentialId: fallbackId
                )
            } catch {
                // CTAP 2.2 §6.2.2: the credential may be left out only when the allow list had exactly one.
                let why =
                    response.credential == nil
                    ? allowList.isEmpty
                        ? " (a phone may leave it out only when the request allows exactly one credential; this was a discoverable sign-in)"
                        : " (a phone may leave it out only when the request allows exactly one credential; it allowed \(allowList.count))"
                    : ""
                throw ProgramFailure(.protocolError, "the phone's assertion is unusable: \(error)\(why)")
            }
            let credentialId = json.rawId.bytes
            let stored = store.credentials.first { $0.credentialId == credentialId && $0.rpId == rpId }
            guard let stored else {
                if foreign {
                    return result(
                        .getAssertion, json: (json.jsonString(), json.jsonString(prettyPrinted: true)),
                        credentialId: credentialId, credential: nil, previousSignCount: nil,
                        check: .skipped(
                            "the RP store has no key for credential \(Base64URL.encode(credentialId)); "
                                + "the relying party that issued the options verifies it"))
                }
                let known = store.credentials(rpId: rpId).count
                let why =
                    known == 0
                    ? "register with --request mc first"
                    : "none with this ID: the passkey was registered with another store, or the phone sent a wrong credential ID"
                throw ProgramFailure(
                    .verificationFailed,
                    "the relying party does not know credential \(Base64URL.encode(credentialId)) "
                        + "(\(store.path) has \(known) credential(s) for \(rpId); \(why))"
                )
            }
            let updated: RegisteredCredential
            do {
                updated = try relyingParty.verifyAuthentication(
                    response: response,
                    clientDataJSON: clientData.json,
                    expectedChallenge: clientData.challenge,
                    credential: stored,
                    allowCredentials: allowList
                )
            } catch {
                throw ProgramFailure(.verificationFailed, "the relying party rejected the sign-in: \(error)")
            }
            store.upsert(updated)
            return result(
                .getAssertion, json: (json.jsonString(), json.jsonString(prettyPrinted: true)),
                credentialId: credentialId, credential: updated, previousSignCount: stored.signCount, check: .verified)
        }
    }

    /// Parses `status ‖ CBOR` with ``Ceremony/payload(_:as:what:)``; a non-zero status is the phone
    /// refusing (`refused`, worded for the statuses a person meets), unparsable bytes `protocolError`.
    private static func payload<T: CTAP2CBORCodable>(
        _ bytes: [UInt8],
        as type: T.Type,
        command: String,
        rpId: String,
        allowed: Int
    ) throws(ProgramFailure) -> T {
        try answer(command: command, rpId: rpId, allowed: allowed) { () throws(Ceremony.Failure) in
            try Ceremony.payload(bytes, as: T.self, what: command)
        }
    }

    /// Runs `read` (a ``Ceremony`` reading of the phone's answer), its failure in the program's
    /// terms: a refusal by status, or a protocol error (exit 7). `allowed` is the number of
    /// credentials the request's allow list names (0: a discoverable sign-in, or a registration):
    /// with one, "no credentials" means none of those is on the phone, not that it has none for the site.
    private static func answer<T>(
        command: String, rpId: String, allowed: Int = 0, _ read: () throws(Ceremony.Failure) -> T
    ) throws(ProgramFailure) -> T {
        do {
            return try read()
        } catch {
            guard error.code == .refused, let status = error.status else {
                throw ProgramFailure(.protocolError, error.reason)
            }
            switch status {
            case .noCredentials where allowed > 0:
                throw ProgramFailure(
                    .refused, "none of the \(allowed) credential(s) the relying party allows is on the phone for \(rpId) (\(status.name))")
            case .noCredentials:
                throw ProgramFailure(.refused, "the phone has no passkey for \(rpId) (\(status.name))")
            case .credentialExcluded:
                throw ProgramFailure(
                    .refused, "the phone already holds one of the excluded credentials for \(rpId) (\(status.name))")
            case .operationDenied:
                // A sign-in is also denied when the phone's user picked no account among several.
                let why = command == "getAssertion" ? "the user said no, or chose no account: the phone's output says which" : "the user said no"
                throw ProgramFailure(.refused, "the phone refused the \(command) request: \(status.name) (\(why))")
            case .userActionTimeout:
                throw ProgramFailure(
                    .timeout, "the phone's user did not answer the \(command) request in time (\(status.name))")
            default:
                throw ProgramFailure(.refused, "the phone refused the \(command) request: \(status.name)")
            }
        }
    }

    /// The one place a ``DesktopResult`` is put together: this ceremony's RP ID, origin and challenge
    /// with what the finish step found.
    private func result(
        _ request: QRPayload.RequestType, json: (compact: String, pretty: String), credentialId: [UInt8],
        credential: RegisteredCredential?, previousSignCount: UInt32?, check: DesktopResult.RelyingPartyCheck,
        notes: [String] = [], attestation: VerifiedAttestation? = nil
    ) -> DesktopResult {
        DesktopResult(
            request: request, rpId: rpId, origin: origin, challenge: clientData.challenge,
            credentialJSON: json.compact, prettyCredentialJSON: json.pretty, credentialId: credentialId,
            credential: credential, previousSignCount: previousSignCount, relyingPartyCheck: check, notes: notes,
            attestation: attestation)
    }
}
