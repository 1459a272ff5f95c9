import CTAP2
import Foundation
import HybridCore

/// Runs real ceremonies against ``SoftwareAuthenticator`` (the phone's CTAP2 authenticator) and
/// offers the tampering helpers the relying-party tests need.
struct CeremonyFixture {
    static let rpId = "example.com"
    static let origin = "https://example.com"
    static let user = PublicKeyCredentialUserEntity(
        id: Array("user-handle-alice".utf8), name: "alice", displayName: "Alice")
    static let now: UInt64 = 1_767_225_600

    /// A registration as the desktop receives it.
    struct Registration {
        var response: MakeCredentialResponse
        var clientDataJSON: [UInt8]
        var challenge: [UInt8]
        var passkey: Passkey
    }

    /// An authentication as the desktop receives it.
    struct Authentication {
        var response: GetAssertionResponse
        var clientDataJSON: [UInt8]
        var challenge: [UInt8]
        var passkey: Passkey
    }

    var authenticator: SoftwareAuthenticator
    private let random: RandomSource

    init(seed: String = "relying-party-tests") {
        random = .deterministic(seed: Array(seed.utf8))
        authenticator = SoftwareAuthenticator(random: .deterministic(seed: Array((seed + "/phone").utf8)))
    }

    /// A fresh 32-byte challenge.
    func challenge() -> [UInt8] { random.bytes(32) }

    /// Client data JSON as the desktop builds it.
    static func clientData(
        _ type: CollectedClientData.CeremonyType, challenge: [UInt8], origin: String = origin, crossOrigin: Bool = false
    ) -> [UInt8] {
        CollectedClientData(type: type, challenge: challenge, origin: origin, crossOrigin: crossOrigin).json
    }

    /// makeCredential through the authenticator's CTAP2 byte interface.
    mutating func register(
        attestation: SoftwareAuthenticator.Attestation = .none, rpId: String = rpId,
        user: PublicKeyCredentialUserEntity = user
    ) throws -> Registration {
        let challenge = challenge()
        let clientDataJSON = Self.clientData(.create, challenge: challenge)
        let request = MakeCredentialRequest(
            clientDataHash: CollectedClientData.hash(ofJSON: clientDataJSON),
            rp: PublicKeyCredentialRpEntity(id: rpId, name: "Example"), user: user,
            pubKeyCredParams: [PublicKeyCredentialParameters(alg: .es256)],
            options: AuthenticatorOptions(rk: true, uv: true))
        let (bytes, outcome) = authenticator.handle(
            CTAP2Request.makeCredential(request).encode(), policy: .init(attestation: attestation), now: Self.now)
        guard case .registered(let passkey) = outcome else { throw FixtureError("makeCredential: \(outcome)") }
        let response = try CTAP2Response(bytes: bytes).decodePayload(as: MakeCredentialResponse.self)
        return Registration(response: response, clientDataJSON: clientDataJSON, challenge: challenge, passkey: passkey)
    }

    /// getAssertion through the authenticator's CTAP2 byte interface.
    mutating func authenticate(rpId: String = rpId, allowList: [[UInt8]]? = nil) throws -> Authentication {
        let challenge = challenge()
        let clientDataJSON = Self.clientData(.get, challenge: challenge)
        let request = GetAssertionRequest(
            rpId: rpId, clientDataHash: CollectedClientData.hash(ofJSON: clientDataJSON),
            allowList: allowList?.map { PublicKeyCredentialDescriptor(id: $0) }, options: AuthenticatorOptions(uv: true)
        )
        let (bytes, outcome) = authenticator.handle(
            CTAP2Request.getAssertion(request).encode(), policy: .init(), now: Self.now)
        guard case .signedIn(let passkey) = outcome else { throw FixtureError("getAssertion: \(outcome)") }
        let response = try CTAP2Response(bytes: bytes).decodePayload(as: GetAssertionResponse.self)
        return Authentication(
            response: response, clientDataJSON: clientDataJSON, challenge: challenge, passkey: passkey)
    }

    /// The relying party the fixtures talk to.
    static func relyingParty(requireUserVerification: Bool = false) -> RelyingParty {
        RelyingParty(id: rpId, origin: origin, requireUserVerification: requireUserVerification)
    }

    /// Registers and verifies, returning the stored record.
    mutating func registeredCredential(attestation: SoftwareAuthenticator.Attestation = .none) throws
        -> RegisteredCredential
    {
        let registration = try register(attestation: attestation)
        // verifiedRegistration: a full attestation's chain is checked, its trust left open.
        return try Self.relyingParty().verifiedRegistration(
            response: registration.response, clientDataJSON: registration.clientDataJSON,
            expectedChallenge: registration.challenge, user: Self.user, now: Self.now
        ).credential
    }
}

// MARK: - Tampering

extension AuthenticatorData {
    /// The same data with other flags, rpIdHash or counter.
    func with(flags: AuthenticatorDataFlags? = nil, rpIdHash: [UInt8]? = nil, signCount: UInt32? = nil) throws
        -> AuthenticatorData
    {
        try AuthenticatorData(
            rpIdHash: rpIdHash ?? self.rpIdHash, flags: flags ?? self.flags, signCount: signCount ?? self.signCount,
            attestedCredentialData: attestedCredentialData, extensions: extensions)
    }
}

extension CeremonyFixture.Authentication {
    /// Replaces authenticator data and/or client data and signs again with the passkey, so the
    /// tampered field is the only thing wrong.
    mutating func resign(authData: AuthenticatorData? = nil, clientDataJSON: [UInt8]? = nil) throws {
        if let authData { response.authData = authData }
        if let clientDataJSON { self.clientDataJSON = clientDataJSON }
        response.signature = try ES256.sign(
            authenticatorData: response.authData.bytes,
            clientDataHash: CollectedClientData.hash(ofJSON: self.clientDataJSON),
            with: passkey.signingKey())
    }
}

extension CeremonyFixture.Registration {
    /// Replaces authenticator data and/or client data; a packed statement is signed again.
    mutating func resign(authData: AuthenticatorData? = nil, clientDataJSON: [UInt8]? = nil) throws {
        if let authData { response.authData = authData }
        if let clientDataJSON { self.clientDataJSON = clientDataJSON }
        if response.fmt == AttestationStatement.packedFormat {
            response = try .packedSelf(
                authData: response.authData, clientDataHash: CollectedClientData.hash(ofJSON: self.clientDataJSON),
                privateKey: passkey.signingKey())
        }
    }
}

/// Flips one bit of byte `index` (counted from the end when negative).
func flipped(_ bytes: [UInt8], at index: Int) -> [UInt8] {
    var out = bytes
    let position = index >= 0 ? index : out.count + index
    out[position] ^= 0x01
    return out
}

struct FixtureError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
