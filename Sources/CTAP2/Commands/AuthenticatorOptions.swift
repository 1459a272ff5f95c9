/// The `options` map of a makeCredential (0x07) or getAssertion (0x05) request
/// (CTAP 2.2 §6.1.2, §6.2.2): `{"rk"?: bool, "up"?: bool, "uv"?: bool}`.
///
/// An absent option means "use the default". Keys other than these three are ignored on decode.
public struct AuthenticatorOptions: CTAP2CBORCodable {
    /// `rk`: create a discoverable (resident) credential. makeCredential only.
    public var rk: Bool?
    /// `up`: test for user presence (default `true`).
    public var up: Bool?
    /// `uv`: perform built-in user verification.
    public var uv: Bool?

    /// Creates options; `nil` leaves an option out of the map.
    public init(rk: Bool? = nil, up: Bool? = nil, uv: Bool? = nil) {
        self.rk = rk
        self.up = up
        self.uv = uv
    }

    public init(cbor: CBORValue) throws(CTAP2Error) {
        let fields = try CBORFields(cbor, context: "options")
        rk = try fields.optional("rk", "rk", .bool)
        up = try fields.optional("up", "up", .bool)
        uv = try fields.optional("uv", "uv", .bool)
    }

    public var cbor: CBORValue {
        var map: [CBORValue: CBORValue] = [:]
        if let rk { map["rk"] = .bool(rk) }
        if let up { map["up"] = .bool(up) }
        if let uv { map["uv"] = .bool(uv) }
        return .map(map)
    }
}
