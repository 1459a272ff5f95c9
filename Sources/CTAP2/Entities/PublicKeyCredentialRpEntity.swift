/// The relying party a credential is created for (WebAuthn §5.4.2, CTAP 2.2 §6.1 `rp`).
///
/// CBOR: `{"id": tstr, "name"?: tstr}`. Other keys (the deprecated `icon`) are ignored.
public struct PublicKeyCredentialRpEntity: CTAP2CBORCodable {
    /// The RP ID, a registrable domain such as `example.com`.
    public var id: String
    /// A human-palatable name for the relying party.
    public var name: String?

    /// Creates an RP entity.
    public init(id: String, name: String? = nil) {
        self.id = id
        self.name = name
    }

    public init(cbor: CBORValue) throws(CTAP2Error) {
        let fields = try CBORFields(cbor, context: "PublicKeyCredentialRpEntity")
        id = try fields.required("id", "id", .text)
        name = try fields.optional("name", "name", .text)
    }

    public var cbor: CBORValue {
        var map: [CBORValue: CBORValue] = ["id": .text(id)]
        if let name { map["name"] = .text(name) }
        return .map(map)
    }
}
