import CTAP2

/// The browser's half of a WebAuthn ceremony over hybrid: it builds the client data and the CTAP2
/// request from relying-party options, and checks the authenticator's answer as that relying party.
///
/// Pure: the challenge and time are inputs. ``Registration`` and ``Authentication`` hold everything
/// needed between sending the request and verifying the response.
public enum Ceremony {
    /// The authenticator answered with a CTAP2 error status, or with bytes that do not parse.
    public struct Failure: CodedError {
        /// Whether the phone refused or answered with something unusable.
        public enum Code: String, Hashable, Sendable, CaseIterable {
            /// The phone answered with a CTAP2 error status (see ``Failure/status``).
            case refused
            /// The response does not parse (``Failure/status`` is `nil`, or `.ok` when only the
            /// payload after a success status is malformed).
            case malformedResponse
        }

        /// Whether the phone refused or its answer was unusable.
        public let code: Code
        /// The CTAP2 status, when the phone refused (or `.ok` before a malformed payload).
        public let status: CTAP2StatusCode?
        /// What happened, for people.
        public let reason: String

        /// Creates a failure.
        public init(_ code: Code, status: CTAP2StatusCode?, reason: String) {
            self.code = code
            self.status = status
            self.reason = reason
        }

        /// A failure of `code` alone, the value tests match thrown errors against.
        public init(_ code: Code) { self.init(code, status: nil, reason: "") }

        public var description: String { reason }
    }

    /// A registration (makeCredential) in progress.
    public struct Registration: Sendable {
        /// The relying party doing the registering.
        public let relyingParty: RelyingParty
        /// The client data the authenticator signs over (its hash is in the request).
        public let clientData: CollectedClientData
        /// The account.
        public let user: PublicKeyCredentialUserEntity
        /// The CTAP2 request.
        public let request: MakeCredentialRequest

        /// Builds the request: ES256 only, a discoverable credential (`rk: true`), and no `uv` option
        /// (the authenticator decides; ``RelyingParty/requireUserVerification`` says whether the UV
        /// flag must then be set).
        public init(
            relyingParty: RelyingParty, rpName: String?, user: PublicKeyCredentialUserEntity, challenge: [UInt8],
            excludeCredentials: [[UInt8]] = []
        ) {
            self.relyingParty = relyingParty
            self.user = user
            self.clientData = CollectedClientData(type: .create, challenge: challenge, origin: relyingParty.origin)
            self.request = MakeCredentialRequest(
                clientDataHash: clientData.hash, rp: PublicKeyCredentialRpEntity(id: relyingParty.id, name: rpName),
                user: user, pubKeyCredParams: [PublicKeyCredentialParameters(alg: .es256)],
                excludeList: excludeCredentials.isEmpty ? nil : excludeCredentials.map { PublicKeyCredentialDescriptor(id: $0) },
                options: AuthenticatorOptions(rk: true))
        }

        /// The bytes to send: `0x01 ‖ CBOR`.
        public var requestBytes: [UInt8] { CTAP2Request.makeCredential(request).encode() }

        /// Checks the phone's answer and returns the credential to store with the parsed response.
        public func verify(
            response bytes: [UInt8], registeredCredentialIds: Set<[UInt8]> = [], now: UInt64
        ) throws -> (credential: RegisteredCredential, response: MakeCredentialResponse) {
            let response = try Ceremony.makeCredentialPayload(bytes)
            let credential = try relyingParty.verifyRegistration(
                response: response, clientDataJSON: clientData.json, expectedChallenge: clientData.challenge, user: user,
                registeredCredentialIds: registeredCredentialIds, now: now)
            return (credential, response)
        }
    }

    /// An authentication (getAssertion) in progress.
    public struct Authentication: Sendable {
        /// The relying party checking the assertion.
        public let relyingParty: RelyingParty
        /// The client data the authenticator signs over.
        public let clientData: CollectedClientData
        /// Allowed credential IDs; empty for a discoverable-credential sign-in.
        public let allowCredentials: [[UInt8]]
        /// The CTAP2 request.
        public let request: GetAssertionRequest

        /// Builds the request: no `up` or `uv` option, an allow list only when `allowCredentials` is
        /// not empty.
        public init(relyingParty: RelyingParty, challenge: [UInt8], allowCredentials: [[UInt8]] = []) {
            self.relyingParty = relyingParty
            self.allowCredentials = allowCredentials
            self.clientData = CollectedClientData(type: .get, challenge: challenge, origin: relyingParty.origin)
            self.request = GetAssertionRequest(
                rpId: relyingParty.id, clientDataHash: clientData.hash,
                allowList: allowCredentials.isEmpty ? nil : allowCredentials.map { PublicKeyCredentialDescriptor(id: $0) })
        }

        /// The bytes to send: `0x02 ‖ CBOR`.
        public var requestBytes: [UInt8] { CTAP2Request.getAssertion(request).encode() }

        /// Checks the phone's answer against the credentials the relying party knows and returns the
        /// updated credential (new signature counter) with the parsed response.
        public func verify(
            response bytes: [UInt8], knownCredentials: some Sequence<RegisteredCredential>
        ) throws -> (credential: RegisteredCredential, response: GetAssertionResponse) {
            let response = try Ceremony.payload(bytes, as: GetAssertionResponse.self, what: "getAssertion")
            let credential = try relyingParty.verifyAuthentication(
                response: response, clientDataJSON: clientData.json, expectedChallenge: clientData.challenge,
                knownCredentials: knownCredentials, allowCredentials: allowCredentials)
            return (credential, response)
        }
    }

    /// ``payload(_:as:what:)`` for a makeCredential answer, then the browser's reading of the new
    /// credential's public key (canonical CBOR, as Chromium reads it): the one way both the
    /// library's ``Registration`` and the desktop program read a registration.
    public static func makeCredentialPayload(_ bytes: [UInt8]) throws(Failure) -> MakeCredentialResponse {
        let response = try payload(bytes, as: MakeCredentialResponse.self, what: "makeCredential")
        try readableByBrowsers(response.authData)
        return response
    }

    /// The browser's reading of a new credential's public key: Chromium reads the COSE key in the
    /// authenticator data with its default, canonical CBOR reader (`AttestedCredentialData::
    /// ConsumeFromCtapResponse`), so a key with its map keys out of order fails the registration
    /// there. `AuthenticatorData` itself keeps the key byte for byte whatever its order, as
    /// relying parties read it; the desktop, which plays the browser, refuses it here.
    ///
    /// - Throws: ``Failure`` `.malformedResponse` naming the rule.
    static func readableByBrowsers(_ authData: AuthenticatorData) throws(Failure) {
        guard let key = authData.attestedCredentialData?.credentialPublicKey else { return }
        do {
            _ = try CBOR.decode(key)
        } catch {
            throw Failure(
                .malformedResponse, status: .ok,
                reason: "the phone's makeCredential response is malformed: the credential public key in its authenticator data "
                    + "is not CTAP2 canonical CBOR (\(error)); a browser reads it strictly (Chromium's CBOR reader) and would fail this registration")
        }
    }

    /// Parses an authenticator's answer `status ‖ CBOR` as `T`: a non-zero status is a
    /// ``Failure`` `.refused` carrying it, unparsable bytes a ``Failure`` `.malformedResponse`.
    /// `what` names the command in the reason ("makeCredential", "getAssertion").
    public static func payload<T: CTAP2CBORCodable>(_ bytes: [UInt8], as type: T.Type, what: String) throws(Failure) -> T {
        let response: CTAP2Response
        do {
            response = try CTAP2Response(bytes: bytes)
        } catch {
            throw Failure(.malformedResponse, status: nil, reason: "the phone's \(what) response is malformed: \(error)")
        }
        guard response.status == .ok else {
            throw Failure(.refused, status: response.status, reason: "the phone refused the \(what) request: \(response.status)")
        }
        do {
            return try response.decodePayload(as: T.self)
        } catch {
            throw Failure(.malformedResponse, status: .ok, reason: "the phone's \(what) response is malformed: \(error)")
        }
    }
}
