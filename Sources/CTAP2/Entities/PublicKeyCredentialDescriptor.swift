/// Identifies one credential in an exclude or allow list, or in a getAssertion response
/// (WebAuthn §5.8.3, CTAP 2.2 §6.1).
///
/// CBOR: `{"id": bstr, "type": tstr, "transports"?: [tstr]}`. The type is kept as sent so that a
/// descriptor of an unknown type can be skipped by the caller, as CTAP requires.
public struct PublicKeyCredentialDescriptor: CTAP2CBORCodable {
    /// The WebAuthn credential type `"public-key"`, the only one defined.
    public static let publicKeyType = "public-key"

    /// The credential type; ``publicKeyType`` in practice.
    public var type: String
    /// The credential ID.
    public var id: [UInt8]
    /// Transport hints (`"usb"`, `"nfc"`, `"ble"`, `"internal"`, `"hybrid"`, `"cable"`), in order.
    public var transports: [String]?

    /// Creates a descriptor.
    public init(type: String = PublicKeyCredentialDescriptor.publicKeyType, id: [UInt8], transports: [String]? = nil) {
        self.type = type
        self.id = id
        self.transports = transports
    }

    public init(cbor: CBORValue) throws(CTAP2Error) {
        let fields = try CBORFields(cbor, context: "PublicKeyCredentialDescriptor")
        type = try fields.required("type", "type", .text)
        id = try fields.required("id", "id", .bytes)
        transports = try fields.optional("transports", "transports", .array(of: .text))
    }

    public var cbor: CBORValue {
        var map: [CBORValue: CBORValue] = ["type": .text(type), "id": .bytes(id)]
        if let transports { map["transports"] = .textArray(transports) }
        return .map(map)
    }
}
