import CTAP2
import Crypto

/// A software CTAP2 authenticator with discoverable ES256 passkeys: what the simulated phone runs
/// behind the tunnel. Pure: the caller owns persistence, randomness and time.
///
/// Behaviour follows a Chromium phone where CTAP 2.2 leaves room: user verification is done on the
/// device (UP and UV set), passkeys are backup-eligible and backed up (BE and BS set, as synced
/// passkeys are), credentials are always discoverable, and a getAssertion matching several accounts
/// asks the user (``Policy/selectAccount``) and returns only the chosen one with `userSelected`.
public struct SoftwareAuthenticator: Sendable {
    /// The attestation a new credential gets.
    public enum Attestation: String, Sendable, CaseIterable {
        /// `"none"`: no statement (what phones send by default).
        case none
        /// `"packed"` self attestation, signed with the new credential's key.
        case packedSelf = "packed"
        /// `"packed"` full attestation (`x5c`), signed with ``Policy/attestationIdentity``'s key
        /// (by default a fresh one under ``SimulatedAttestationCA``); the credential carries the
        /// identity's AAGUID instead of zeros.
        case packedFull = "packed-x5c"

        /// The `fmt` a response carries: `none`, or `packed` for both packed variants.
        public var format: String { self == .none ? AttestationStatement.noneFormat : AttestationStatement.packedFormat }
    }

    /// How the simulated user and device answer.
    public struct Policy: Sendable {
        /// The user refuses every request (`CTAP2_ERR_OPERATION_DENIED`).
        public var deny: Bool
        /// The attestation for new credentials.
        public var attestation: Attestation
        /// The key and certificates for ``Attestation/packedFull``; `nil`: a fresh identity under
        /// ``SimulatedAttestationCA`` per registration, from the authenticator's random source.
        public var attestationIdentity: AttestationIdentity?
        /// Picks one of several matching passkeys; `nil` means the user cancelled.
        public var selectAccount: @Sendable ([Passkey]) -> Passkey?

        /// Creates a policy. By default the user agrees and picks the first account.
        public init(
            deny: Bool = false, attestation: Attestation = .none, attestationIdentity: AttestationIdentity? = nil,
            selectAccount: @escaping @Sendable ([Passkey]) -> Passkey? = { $0.first }
        ) {
            self.deny = deny
            self.attestation = attestation
            self.attestationIdentity = attestationIdentity
            self.selectAccount = selectAccount
        }
    }

    /// What a request did, for narration and for the caller's persistence.
    public enum Outcome: Sendable, Hashable {
        /// A passkey was created (persist it).
        case registered(Passkey)
        /// A passkey signed an assertion; its counter changed (persist it).
        case signedIn(Passkey)
        /// getInfo or selection answered.
        case answered(CTAP2Command)
        /// The request was refused with this status.
        case refused(CTAP2StatusCode, reason: String)
    }

    /// The authenticator's AAGUID without full attestation (16 zero bytes, as Chromium phones send).
    public static let aaguid = [UInt8](repeating: 0, count: 16)

    /// The getInfo response (FIDO_2_0/2_1, rk and uv, hybrid transports, ES256) with the zero
    /// ``aaguid``; ``getInfo(for:)`` is the one a phone answering under a policy sends.
    public static let getInfo = getInfo(aaguid: aaguid)

    /// The AAGUID the credentials made under `policy` carry: ``aaguid`` (zeros), or for
    /// ``Attestation/packedFull`` the attestation identity's (``SimulatedAttestationCA/aaguid`` by
    /// default), which its certificate's `id-fido-gen-ce-aaguid` extension names.
    public static func aaguid(for policy: Policy) -> [UInt8] {
        policy.attestation == .packedFull ? policy.attestationIdentity?.aaguid ?? SimulatedAttestationCA.aaguid : aaguid
    }

    /// The getInfo response of an authenticator answering under `policy`: ``getInfo`` with the
    /// AAGUID of ``aaguid(for:)``, so that getInfo, the credentials' authenticator data and the
    /// attestation certificate name one authenticator model (CTAP 2.2 §6.4 `aaguid`; WebAuthn §8.2.1).
    public static func getInfo(for policy: Policy) -> AuthenticatorGetInfoResponse {
        getInfo(aaguid: aaguid(for: policy))
    }

    private static func getInfo(aaguid: [UInt8]) -> AuthenticatorGetInfoResponse {
        AuthenticatorGetInfoResponse(
            versions: ["FIDO_2_0", "FIDO_2_1"], aaguid: aaguid, options: ["rk": true, "uv": true],
            transports: ["cable", "hybrid", "internal"], algorithms: [PublicKeyCredentialParameters(alg: .es256)])
    }

    /// The stored passkeys.
    public var passkeys: [Passkey]
    private let random: RandomSource

    /// Creates an authenticator holding `passkeys`.
    public init(passkeys: [Passkey] = [], random: RandomSource = .system) {
        self.passkeys = passkeys
        self.random = random
    }

    /// Answers one request (command ‖ CBOR) with a response (status ‖ CBOR).
    /// - Parameters:
    ///   - request: the CTAP2 request bytes, command byte first.
    ///   - policy: what the simulated user does (approve or deny, attestation, account choice).
    ///   - now: seconds since the Unix epoch, recorded on new passkeys.
    public mutating func handle(_ request: [UInt8], policy: Policy, now: UInt64) -> (response: [UInt8], outcome: Outcome) {
        let decoded: CTAP2Request
        do {
            decoded = try CTAP2Request(bytes: request)
        } catch {
            return refuse(error.statusCode, "malformed request: \(error)")
        }
        switch decoded {
        case .makeCredential(let request):
            return makeCredential(request, policy: policy, now: now)
        case .getAssertion(let request):
            return getAssertion(request, policy: policy)
        case .getInfo:
            return (CTAP2Response(Self.getInfo(for: policy)).encode(), .answered(.getInfo))
        case .selection:
            if policy.deny { return refuse(.operationDenied, "the user refused") }
            return (CTAP2Response(status: .ok).encode(), .answered(.selection))
        case .other(let command, _):
            // A CBOR map header where the command should be: a request whose command byte is missing.
            let hint = CBOR.isDefiniteMapHeader(command.rawValue) ? " (it is a CBOR map header: is the command byte missing?)" : ""
            return refuse(.invalidCommand, "\(command) is not supported over hybrid\(hint)")
        }
    }

    private mutating func makeCredential(
        _ request: MakeCredentialRequest, policy: Policy, now: UInt64
    ) -> (response: [UInt8], outcome: Outcome) {
        guard request.pubKeyCredParams.contains(where: { $0.alg == .es256 && $0.type == PublicKeyCredentialDescriptor.publicKeyType }) else {
            return refuse(.unsupportedAlgorithm, "the relying party accepts no ES256 credential")
        }
        if request.options?.up == false { return refuse(.invalidOption, "user presence cannot be skipped for makeCredential") }
        let excluded = Set((request.excludeList ?? []).map(\.id))
        if let held = passkeys.first(where: { $0.rpID == request.rp.id && excluded.contains($0.credentialID) }) {
            // The excluded credential's own account, which need not be the one being registered.
            let owner = held.userName.map { " (\($0))" } ?? ""
            return refuse(
                .credentialExcluded,
                "this phone already holds a passkey the relying party excluded\(owner): one credential per authenticator")
        }
        if policy.deny { return refuse(.operationDenied, "the user refused to create a passkey") }

        let key = random.signingKey()
        let passkey = Passkey(
            credentialID: random.bytes(16), rpID: request.rp.id, rpName: request.rp.name, userID: request.user.id,
            userName: request.user.name, userDisplayName: request.user.displayName,
            privateKey: Array(key.rawRepresentation), signCount: 0, createdAt: now)
        let identity =
            policy.attestation == .packedFull
            ? policy.attestationIdentity ?? SimulatedAttestationCA.identity(random: random, now: now) : nil
        do {
            // The one decision getInfo names too (``aaguid(for:)``); the identity's certificate
            // carries the same AAGUID in its extension.
            let attested = try AttestedCredentialData(
                aaguid: Self.aaguid(for: policy), credentialId: passkey.credentialID,
                credentialPublicKey: COSEKey(publicKey: key.publicKey))
            let authData = AuthenticatorData(
                rpId: request.rp.id, flags: [.userPresent, .userVerified, .backupEligible, .backupState],
                signCount: passkey.signCount, attestedCredentialData: attested)
            let response: MakeCredentialResponse
            switch policy.attestation {
            case .none: response = .none(authData: authData)
            case .packedSelf: response = try .packedSelf(authData: authData, clientDataHash: request.clientDataHash, privateKey: key)
            case .packedFull:
                guard let identity else { preconditionFailure("packed-x5c always has an attestation identity") }
                response = try .packedFull(
                    authData: authData, clientDataHash: request.clientDataHash, attestationKey: identity.attestationKey,
                    x5c: identity.x5c)
            }
            // One discoverable credential per account and relying party: a new one replaces the old.
            passkeys.removeAll { $0.rpID == passkey.rpID && $0.userID == passkey.userID }
            passkeys.append(passkey)
            return (CTAP2Response(response).encode(), .registered(passkey))
        } catch {
            return refuse(.other, "could not build the credential: \(error)")
        }
    }

    private mutating func getAssertion(_ request: GetAssertionRequest, policy: Policy) -> (response: [UInt8], outcome: Outcome) {
        if request.options?.up == false { return refuse(.unsupportedOption, "silent assertions are not supported") }
        let allowed = request.allowList.map { Set($0.map(\.id)) }
        let candidates = passkeys.filter { passkey in
            passkey.rpID == request.rpId && (allowed.map { $0.isEmpty || $0.contains(passkey.credentialID) } ?? true)
        }
        guard !candidates.isEmpty else {
            let forSite = passkeys.filter { $0.rpID == request.rpId }.count
            if let allowList = request.allowList, !allowList.isEmpty, forSite > 0 {
                // Not "no passkey": the phone has some for the site, just none the relying party named.
                return refuse(
                    .noCredentials,
                    "none of this phone's \(forSite) passkey(s) for \(request.rpId) is among the \(allowList.count) credential(s) the relying party allows")
            }
            return refuse(.noCredentials, "no passkey for \(request.rpId) on this phone")
        }
        if policy.deny { return refuse(.operationDenied, "the user refused to sign in") }
        guard let chosen = candidates.count == 1 ? candidates[0] : policy.selectAccount(candidates),
            let index = passkeys.firstIndex(where: { $0.credentialID == chosen.credentialID })
        else {
            return refuse(.operationDenied, "the user did not pick an account")
        }
        // The counter is 32 bits (WebAuthn §6.1); wrapping to 0 would look like a cloned key to the
        // relying party, so an exhausted counter is refused instead.
        guard passkeys[index].signCount < UInt32.max else {
            return refuse(
                .limitExceeded,
                "the signature counter of \(passkeys[index].label) reached 4294967295 and cannot grow; register a new passkey"
            )
        }
        passkeys[index].signCount += 1
        let passkey = passkeys[index]
        do {
            let authData = AuthenticatorData(
                rpId: request.rpId, flags: [.userPresent, .userVerified, .backupEligible, .backupState],
                signCount: passkey.signCount)
            let signature = try ES256.sign(
                authenticatorData: authData.bytes, clientDataHash: request.clientDataHash, with: passkey.signingKey())
            let discoverable = request.allowList?.isEmpty ?? true
            let response = GetAssertionResponse(
                credential: PublicKeyCredentialDescriptor(id: passkey.credentialID), authData: authData,
                signature: signature, user: discoverable ? passkey.userEntity : nil,
                userSelected: candidates.count > 1 ? true : nil)
            return (CTAP2Response(response).encode(), .signedIn(passkey))
        } catch {
            return refuse(.other, "could not sign: \(error)")
        }
    }

    private func refuse(_ status: CTAP2StatusCode, _ reason: String) -> (response: [UInt8], outcome: Outcome) {
        (CTAP2Response.error(status).encode(), .refused(status, reason: reason))
    }
}
