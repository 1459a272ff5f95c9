import CTAP2

/// What a relying party keeps about a registered credential (WebAuthn L3 §7.1 step 27,
/// "credential record"): enough to verify later assertions with ``RelyingParty``.
///
/// Its JSON form (one entry of the relying-party store, `Docs/STORES.md`) keeps binary values in
/// unpadded base64url:
///
/// ```json
/// {"credentialId": "…", "publicKey": "<COSE_Key CBOR>", "signCount": 0, "userId": "…",
///  "userName": "alice", "rpId": "example.com", "createdAt": 1767225600,
///  "attestationFormat": "none", "backupEligible": true, "backupState": true}
/// ```
///
/// Decoding validates the record: the credential ID is 1…1023 bytes and the public key is an ES256
/// COSE_Key, so a damaged store is reported when it is read, not at the next sign-in.
public struct RegisteredCredential: Hashable, Sendable, Codable {
    /// The credential ID.
    public var credentialId: [UInt8]
    /// The credential public key as the authenticator encoded it: one COSE_Key CBOR map.
    public var publicKey: [UInt8]
    /// The last signature counter seen (0 for authenticators without one).
    public var signCount: UInt32
    /// The user handle the credential was created for.
    public var userId: [UInt8]
    /// The account name at registration, if the relying party gave one.
    public var userName: String?
    /// The relying party ID the credential is scoped to.
    public var rpId: String
    /// Seconds since the Unix epoch when it was registered.
    public var createdAt: UInt64
    /// The attestation statement format it was registered with (`"none"`, `"packed"`).
    public var attestationFormat: String
    /// BE at registration: the credential may be synced (it never changes afterwards).
    public var backupEligible: Bool
    /// BS at the last ceremony: the credential is currently backed up.
    public var backupState: Bool

    /// Creates a record.
    public init(
        credentialId: [UInt8], publicKey: [UInt8], signCount: UInt32, userId: [UInt8], userName: String?,
        rpId: String, createdAt: UInt64, attestationFormat: String, backupEligible: Bool, backupState: Bool
    ) {
        self.credentialId = credentialId
        self.publicKey = publicKey
        self.signCount = signCount
        self.userId = userId
        self.userName = userName
        self.rpId = rpId
        self.createdAt = createdAt
        self.attestationFormat = attestationFormat
        self.backupEligible = backupEligible
        self.backupState = backupState
    }

    /// The public key as an ES256 `COSEKey`.
    ///
    /// - Throws: ``RelyingPartyError/Code/invalidStoredCredential`` when it does not decode.
    public func coseKey() throws(RelyingPartyError) -> COSEKey {
        do {
            return try COSEKey(bytes: publicKey, requireCanonical: false)
        } catch {
            throw RelyingPartyError(
                .invalidStoredCredential, "public key of credential \(Base64URL.encode(credentialId)): \(error.reason)")
        }
    }

    // MARK: - Codable

    private enum CodingKeys: String, CodingKey {
        case credentialId, publicKey, signCount, userId, userName, rpId, createdAt, attestationFormat,
            backupEligible, backupState
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        credentialId = try c.decodeBase64URL(forKey: .credentialId)
        guard (1...AttestedCredentialData.maximumCredentialIdLength).contains(credentialId.count) else {
            throw DecodingError.dataCorruptedError(
                forKey: .credentialId, in: c,
                debugDescription: "credential ID must be 1…1023 bytes, found \(credentialId.count)")
        }
        publicKey = try c.decodeBase64URL(forKey: .publicKey)
        do {
            _ = try COSEKey(bytes: publicKey, requireCanonical: false)
        } catch {
            throw DecodingError.dataCorruptedError(
                forKey: .publicKey, in: c, debugDescription: "not an ES256 COSE_Key: \(error.reason)")
        }
        signCount = try c.decode(UInt32.self, forKey: .signCount)
        userId = try c.decodeBase64URL(forKey: .userId)
        userName = try c.decodeIfPresent(String.self, forKey: .userName)
        rpId = try c.decode(String.self, forKey: .rpId)
        createdAt = try c.decode(UInt64.self, forKey: .createdAt)
        attestationFormat = try c.decode(String.self, forKey: .attestationFormat)
        backupEligible = try c.decode(Bool.self, forKey: .backupEligible)
        backupState = try c.decode(Bool.self, forKey: .backupState)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeBase64URL(credentialId, forKey: .credentialId)
        try c.encodeBase64URL(publicKey, forKey: .publicKey)
        try c.encode(signCount, forKey: .signCount)
        try c.encodeBase64URL(userId, forKey: .userId)
        try c.encodeIfPresent(userName, forKey: .userName)
        try c.encode(rpId, forKey: .rpId)
        try c.encode(createdAt, forKey: .createdAt)
        try c.encode(attestationFormat, forKey: .attestationFormat)
        try c.encode(backupEligible, forKey: .backupEligible)
        try c.encode(backupState, forKey: .backupState)
    }
}
