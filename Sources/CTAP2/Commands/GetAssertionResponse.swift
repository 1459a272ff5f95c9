/// The response to `authenticatorGetAssertion` (CTAP 2.2 §6.2.3).
///
/// | key | field |
/// | --- | --- |
/// | 0x01 | credential? (descriptor; may be omitted when the allow list had exactly one entry) |
/// | 0x02 | authData (bstr, parsed into ``AuthenticatorData``) |
/// | 0x03 | signature (bstr, DER for ES256) |
/// | 0x04 | user? |
/// | 0x05 | numberOfCredentials? |
/// | 0x06 | userSelected? |
/// | 0x07 | largeBlobKey? |
/// | 0x08 | unsignedExtensionOutputs? (CTAP 2.2) |
///
/// Chromium phones send `{1: {"id", "type", "transports": ["internal", "cable"]}, 2, 3, 4?, 6?, 8?}`
/// (PROTOCOL.md §8.2).
public struct GetAssertionResponse: CTAP2CBORCodable {
    /// The credential that signed.
    public var credential: PublicKeyCredentialDescriptor?
    /// The authenticator data that was signed.
    public var authData: AuthenticatorData
    /// The assertion signature over `authData ‖ clientDataHash`.
    public var signature: [UInt8]
    /// The user account, for discoverable credentials.
    public var user: PublicKeyCredentialUserEntity?
    /// How many credentials matched (getNextAssertion follows when above 1).
    public var numberOfCredentials: Int?
    /// Whether the user chose this credential on the authenticator.
    public var userSelected: Bool?
    /// The large-blob key of the credential.
    public var largeBlobKey: [UInt8]?
    /// Extension outputs that are not signed (CTAP 2.2; Chromium phones put PRF results here).
    public var unsignedExtensionOutputs: [String: CBORValue]?

    /// Creates a response.
    public init(
        credential: PublicKeyCredentialDescriptor?,
        authData: AuthenticatorData,
        signature: [UInt8],
        user: PublicKeyCredentialUserEntity? = nil,
        numberOfCredentials: Int? = nil,
        userSelected: Bool? = nil,
        largeBlobKey: [UInt8]? = nil,
        unsignedExtensionOutputs: [String: CBORValue]? = nil
    ) {
        self.credential = credential
        self.authData = authData
        self.signature = signature
        self.user = user
        self.numberOfCredentials = numberOfCredentials
        self.userSelected = userSelected
        self.largeBlobKey = largeBlobKey
        self.unsignedExtensionOutputs = unsignedExtensionOutputs
    }

    public init(cbor: CBORValue) throws(CTAP2Error) {
        let fields = try CBORFields(cbor, context: "authenticatorGetAssertion response")
        credential = try fields.optional(0x01, "credential", .structure)
        authData = try fields.required(0x02, "authData", .authenticatorData)
        signature = try fields.required(0x03, "signature", .bytes)
        user = try fields.optional(0x04, "user", .structure)
        numberOfCredentials = try fields.optional(0x05, "numberOfCredentials", .unsigned)
        userSelected = try fields.optional(0x06, "userSelected", .bool)
        largeBlobKey = try fields.optional(0x07, "largeBlobKey", .bytes)
        unsignedExtensionOutputs = try fields.optional(0x08, "unsignedExtensionOutputs", .textKeyedMap)
    }

    public var cbor: CBORValue {
        var map: [CBORValue: CBORValue] = [0x02: .bytes(authData.bytes), 0x03: .bytes(signature)]
        if let credential { map[0x01] = credential.cbor }
        if let user { map[0x04] = user.cbor }
        if let numberOfCredentials { map[0x05] = .int(numberOfCredentials) }
        if let userSelected { map[0x06] = .bool(userSelected) }
        if let largeBlobKey { map[0x07] = .bytes(largeBlobKey) }
        if let unsignedExtensionOutputs { map[0x08] = .textMap(unsignedExtensionOutputs) }
        return .map(map)
    }

    /// Verifies ``signature`` over `authData ‖ clientDataHash` with the credential's public key,
    /// as a relying party does (WebAuthn §7.2 step 21).
    ///
    /// - Throws: ``CTAP2Error/Code/invalidSignature``.
    public func verifySignature(clientDataHash: [UInt8], publicKey: COSEKey) throws(CTAP2Error) {
        try ES256.verify(
            signature: signature, authenticatorData: authData.bytes, clientDataHash: clientDataHash,
            publicKey: publicKey)
    }
}
