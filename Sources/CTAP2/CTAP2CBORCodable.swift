/// A CTAP2 structure with a CBOR form: the command parameter and response maps, the WebAuthn
/// entities inside them and COSE keys.
///
/// Decoding ignores map keys it does not know and throws ``CTAP2Error`` naming the field when a
/// known one is missing or of the wrong type. Encoding is CTAP2 canonical, so a structure decoded
/// from canonical bytes re-encodes to the same bytes as long as it held no unknown keys.
public protocol CTAP2CBORCodable: Hashable, Sendable {
    /// Decodes the structure from its CBOR value.
    init(cbor: CBORValue) throws(CTAP2Error)
    /// The CBOR value of the structure.
    var cbor: CBORValue { get }
}

extension CTAP2CBORCodable {
    /// Decodes the structure from CTAP2 canonical CBOR bytes spanning the whole input.
    public init(bytes: some Collection<UInt8>) throws(CTAP2Error) {
        let value: CBORValue
        do {
            value = try CBOR.decode(bytes)
        } catch {
            throw CTAP2Error(cbor: error, in: "\(Self.self)")
        }
        try self.init(cbor: value)
    }

    /// The structure as CTAP2 canonical CBOR bytes.
    public func encode() -> [UInt8] {
        CBOR.encode(cbor)
    }
}
