import CTAP2
import Crypto

/// A discoverable ES256 credential held by the simulated phone.
///
/// Its JSON form (used by the phone's passkey store) keeps binary values in unpadded base64url:
/// `{"credentialId", "rpId", "rpName", "userId", "userName", "userDisplayName", "privateKey", "signCount", "createdAt"}`.
public struct Passkey: Sendable, Hashable, Codable {
    /// The credential ID the relying party stores.
    public var credentialID: [UInt8]
    /// The relying party ID it is scoped to.
    public var rpID: String
    /// The relying party's name at registration, if given.
    public var rpName: String?
    /// The user handle.
    public var userID: [UInt8]
    /// The account name (e.g. `alice`).
    public var userName: String?
    /// The account's display name.
    public var userDisplayName: String?
    /// The P-256 private scalar (32 bytes).
    public var privateKey: [UInt8]
    /// The signature counter, incremented on every assertion.
    public var signCount: UInt32
    /// Seconds since the Unix epoch when it was created.
    public var createdAt: UInt64

    /// Creates a passkey.
    public init(
        credentialID: [UInt8], rpID: String, rpName: String? = nil, userID: [UInt8], userName: String?,
        userDisplayName: String?, privateKey: [UInt8], signCount: UInt32 = 0, createdAt: UInt64
    ) {
        self.credentialID = credentialID
        self.rpID = rpID
        self.rpName = rpName
        self.userID = userID
        self.userName = userName
        self.userDisplayName = userDisplayName
        self.privateKey = privateKey
        self.signCount = signCount
        self.createdAt = createdAt
    }

    /// The signing key.
    public func signingKey() throws(CTAP2Error) -> P256.Signing.PrivateKey {
        do {
            return try P256.Signing.PrivateKey(rawRepresentation: privateKey)
        } catch {
            throw CTAP2Error(.invalidValue, "stored private key of credential \(Base64URL.encode(credentialID)) is not a P-256 scalar")
        }
    }

    /// The user entity to return from a discoverable getAssertion.
    public var userEntity: PublicKeyCredentialUserEntity {
        PublicKeyCredentialUserEntity(id: userID, name: userName, displayName: userDisplayName)
    }

    /// A short human label: `alice @ example.com`.
    public var label: String { "\(userName ?? Base64URL.encode(userID)) @ \(rpID)" }

    private enum CodingKeys: String, CodingKey {
        case credentialID = "credentialId", rpID = "rpId", rpName, userID = "userId", userName, userDisplayName,
            privateKey, signCount, createdAt
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        credentialID = try c.decodeBase64URL(forKey: .credentialID)
        rpID = try c.decode(String.self, forKey: .rpID)
        rpName = try c.decodeIfPresent(String.self, forKey: .rpName)
        userID = try c.decodeBase64URL(forKey: .userID)
        userName = try c.decodeIfPresent(String.self, forKey: .userName)
        userDisplayName = try c.decodeIfPresent(String.self, forKey: .userDisplayName)
        privateKey = try c.decodeBase64URL(forKey: .privateKey)
        guard privateKey.count == 32 else {
            throw DecodingError.dataCorruptedError(forKey: .privateKey, in: c, debugDescription: "private key must be 32 bytes")
        }
        signCount = try c.decode(UInt32.self, forKey: .signCount)
        createdAt = try c.decode(UInt64.self, forKey: .createdAt)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeBase64URL(credentialID, forKey: .credentialID)
        try c.encode(rpID, forKey: .rpID)
        try c.encodeIfPresent(rpName, forKey: .rpName)
        try c.encodeBase64URL(userID, forKey: .userID)
        try c.encodeIfPresent(userName, forKey: .userName)
        try c.encodeIfPresent(userDisplayName, forKey: .userDisplayName)
        try c.encodeBase64URL(privateKey, forKey: .privateKey)
        try c.encode(signCount, forKey: .signCount)
        try c.encode(createdAt, forKey: .createdAt)
    }
}
