/// The user account a credential belongs to (WebAuthn §5.4.3, CTAP 2.2 §6.1 `user`).
///
/// CBOR: `{"id": bstr, "name"?: tstr, "displayName"?: tstr}`. Other keys (`icon`) are ignored.
/// Chromium phones return `{"id": …, "name": "", "displayName": ""}` in getAssertion responses.
public struct PublicKeyCredentialUserEntity: CTAP2CBORCodable {
    /// The user handle: opaque bytes chosen by the relying party (at most 64 bytes in WebAuthn).
    public var id: [UInt8]
    /// The account name, such as `alice@example.com`.
    public var name: String?
    /// A human-palatable name, such as `Alice`.
    public var displayName: String?

    /// Creates a user entity.
    public init(id: [UInt8], name: String? = nil, displayName: String? = nil) {
        self.id = id
        self.name = name
        self.displayName = displayName
    }

    public init(cbor: CBORValue) throws(CTAP2Error) {
        let fields = try CBORFields(cbor, context: "PublicKeyCredentialUserEntity")
        id = try fields.required("id", "id", .bytes)
        name = try fields.optional("name", "name", .text)
        displayName = try fields.optional("displayName", "displayName", .text)
    }

    public var cbor: CBORValue {
        var map: [CBORValue: CBORValue] = ["id": .bytes(id)]
        if let name { map["name"] = .text(name) }
        if let displayName { map["displayName"] = .text(displayName) }
        return .map(map)
    }
}
