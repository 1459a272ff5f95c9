/// The parameters of `authenticatorGetAssertion` (0x02), CTAP 2.2 §6.2.
///
/// | key | field |
/// | --- | --- |
/// | 0x01 | rpId (tstr) |
/// | 0x02 | clientDataHash (bstr, 32) |
/// | 0x03 | allowList? |
/// | 0x04 | extensions? |
/// | 0x05 | options? |
/// | 0x06 | pinUvAuthParam? |
/// | 0x07 | pinUvAuthProtocol? |
public struct GetAssertionRequest: CTAP2CBORCodable {
    /// The relying party ID.
    public var rpId: String
    /// SHA-256 of the client data JSON (32 bytes).
    public var clientDataHash: [UInt8]
    /// Credentials the relying party accepts; absent for discoverable-credential sign-in.
    public var allowList: [PublicKeyCredentialDescriptor]?
    /// Extension inputs by extension identifier.
    public var extensions: [String: CBORValue]?
    /// `up`, `uv` (`rk` is not valid here and is left for the authenticator to reject).
    public var options: AuthenticatorOptions?
    /// The PIN/UV auth parameter (not used over hybrid).
    public var pinUvAuthParam: [UInt8]?
    /// The PIN/UV auth protocol version.
    public var pinUvAuthProtocol: Int?

    /// Creates a request.
    public init(
        rpId: String,
        clientDataHash: [UInt8],
        allowList: [PublicKeyCredentialDescriptor]? = nil,
        extensions: [String: CBORValue]? = nil,
        options: AuthenticatorOptions? = nil,
        pinUvAuthParam: [UInt8]? = nil,
        pinUvAuthProtocol: Int? = nil
    ) {
        self.rpId = rpId
        self.clientDataHash = clientDataHash
        self.allowList = allowList
        self.extensions = extensions
        self.options = options
        self.pinUvAuthParam = pinUvAuthParam
        self.pinUvAuthProtocol = pinUvAuthProtocol
    }

    public init(cbor: CBORValue) throws(CTAP2Error) {
        let fields = try CBORFields(cbor, context: "authenticatorGetAssertion")
        rpId = try fields.required(0x01, "rpId", .text)
        clientDataHash = try fields.required(0x02, "clientDataHash", .bytes(count: 32))
        allowList = try fields.optional(0x03, "allowList", .array(of: .structure))
        extensions = try fields.optional(0x04, "extensions", .textKeyedMap)
        options = try fields.optional(0x05, "options", .structure)
        pinUvAuthParam = try fields.optional(0x06, "pinUvAuthParam", .bytes)
        pinUvAuthProtocol = try fields.optional(0x07, "pinUvAuthProtocol", .unsigned)
    }

    public var cbor: CBORValue {
        var map: [CBORValue: CBORValue] = [0x01: .text(rpId), 0x02: .bytes(clientDataHash)]
        if let allowList { map[0x03] = .array(allowList.map(\.cbor)) }
        if let extensions { map[0x04] = .textMap(extensions) }
        if let options { map[0x05] = options.cbor }
        if let pinUvAuthParam { map[0x06] = .bytes(pinUvAuthParam) }
        if let pinUvAuthProtocol { map[0x07] = .int(pinUvAuthProtocol) }
        return .map(map)
    }
}
