/// The parameters of `authenticatorMakeCredential` (0x01), CTAP 2.2 §6.1.
///
/// | key | field |
/// | --- | --- |
/// | 0x01 | clientDataHash (bstr, 32) |
/// | 0x02 | rp |
/// | 0x03 | user |
/// | 0x04 | pubKeyCredParams |
/// | 0x05 | excludeList? |
/// | 0x06 | extensions? |
/// | 0x07 | options? |
/// | 0x08 | pinUvAuthParam? |
/// | 0x09 | pinUvAuthProtocol? |
/// | 0x0A | enterpriseAttestation? |
/// | 0x0B | attestationFormatsPreference? (CTAP 2.2) |
public struct MakeCredentialRequest: CTAP2CBORCodable {
    /// SHA-256 of the client data JSON (32 bytes).
    public var clientDataHash: [UInt8]
    /// The relying party.
    public var rp: PublicKeyCredentialRpEntity
    /// The user account.
    public var user: PublicKeyCredentialUserEntity
    /// Acceptable credential types and algorithms, most preferred first.
    public var pubKeyCredParams: [PublicKeyCredentialParameters]
    /// Credentials that must not already exist on the authenticator.
    public var excludeList: [PublicKeyCredentialDescriptor]?
    /// Extension inputs by extension identifier.
    public var extensions: [String: CBORValue]?
    /// `rk`, `up`, `uv`.
    public var options: AuthenticatorOptions?
    /// The PIN/UV auth parameter (not used over hybrid).
    public var pinUvAuthParam: [UInt8]?
    /// The PIN/UV auth protocol version.
    public var pinUvAuthProtocol: Int?
    /// Enterprise attestation kind requested (1 or 2).
    public var enterpriseAttestation: Int?
    /// Attestation statement formats the platform prefers, most preferred first.
    public var attestationFormatsPreference: [String]?

    /// Creates a request.
    public init(
        clientDataHash: [UInt8],
        rp: PublicKeyCredentialRpEntity,
        user: PublicKeyCredentialUserEntity,
        pubKeyCredParams: [PublicKeyCredentialParameters],
        excludeList: [PublicKeyCredentialDescriptor]? = nil,
        extensions: [String: CBORValue]? = nil,
        options: AuthenticatorOptions? = nil,
        pinUvAuthParam: [UInt8]? = nil,
        pinUvAuthProtocol: Int? = nil,
        enterpriseAttestation: Int? = nil,
        attestationFormatsPreference: [String]? = nil
    ) {
        self.clientDataHash = clientDataHash
        self.rp = rp
        self.user = user
        self.pubKeyCredParams = pubKeyCredParams
        self.excludeList = excludeList
        self.extensions = extensions
        self.options = options
        self.pinUvAuthParam = pinUvAuthParam
        self.pinUvAuthProtocol = pinUvAuthProtocol
        self.enterpriseAttestation = enterpriseAttestation
        self.attestationFormatsPreference = attestationFormatsPreference
    }

    public init(cbor: CBORValue) throws(CTAP2Error) {
        let fields = try CBORFields(cbor, context: "authenticatorMakeCredential")
        clientDataHash = try fields.required(0x01, "clientDataHash", .bytes(count: 32))
        rp = try fields.required(0x02, "rp", .structure)
        user = try fields.required(0x03, "user", .structure)
        pubKeyCredParams = try fields.required(0x04, "pubKeyCredParams", .array(of: .structure))
        excludeList = try fields.optional(0x05, "excludeList", .array(of: .structure))
        extensions = try fields.optional(0x06, "extensions", .textKeyedMap)
        options = try fields.optional(0x07, "options", .structure)
        pinUvAuthParam = try fields.optional(0x08, "pinUvAuthParam", .bytes)
        pinUvAuthProtocol = try fields.optional(0x09, "pinUvAuthProtocol", .unsigned)
        enterpriseAttestation = try fields.optional(0x0A, "enterpriseAttestation", .unsigned)
        attestationFormatsPreference = try fields.optional(0x0B, "attestationFormatsPreference", .array(of: .text))
    }

    public var cbor: CBORValue {
        var map: [CBORValue: CBORValue] = [
            0x01: .bytes(clientDataHash),
            0x02: rp.cbor,
            0x03: user.cbor,
            0x04: .array(pubKeyCredParams.map(\.cbor)),
        ]
        if let excludeList { map[0x05] = .array(excludeList.map(\.cbor)) }
        if let extensions { map[0x06] = .textMap(extensions) }
        if let options { map[0x07] = options.cbor }
        if let pinUvAuthParam { map[0x08] = .bytes(pinUvAuthParam) }
        if let pinUvAuthProtocol { map[0x09] = .int(pinUvAuthProtocol) }
        if let enterpriseAttestation { map[0x0A] = .int(enterpriseAttestation) }
        if let attestationFormatsPreference { map[0x0B] = .textArray(attestationFormatsPreference) }
        return .map(map)
    }
}
