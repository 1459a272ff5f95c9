/// One acceptable credential type and algorithm (WebAuthn §5.3, CTAP 2.2 §6.1 `pubKeyCredParams`,
/// getInfo `algorithms`).
///
/// CBOR: `{"alg": int, "type": tstr}`.
public struct PublicKeyCredentialParameters: CTAP2CBORCodable {
    /// The credential type; ``PublicKeyCredentialDescriptor/publicKeyType`` in practice.
    public var type: String
    /// The COSE algorithm.
    public var alg: COSEAlgorithmIdentifier

    /// Creates parameters; the type defaults to `"public-key"`.
    public init(type: String = PublicKeyCredentialDescriptor.publicKeyType, alg: COSEAlgorithmIdentifier) {
        self.type = type
        self.alg = alg
    }

    public init(cbor: CBORValue) throws(CTAP2Error) {
        let fields = try CBORFields(cbor, context: "PublicKeyCredentialParameters")
        type = try fields.required("type", "type", .text)
        alg = COSEAlgorithmIdentifier(rawValue: try fields.required("alg", "alg", .int))
    }

    public var cbor: CBORValue {
        ["alg": .int(alg.rawValue), "type": .text(type)]
    }
}
