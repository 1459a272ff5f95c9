import Crypto

/// An EC2 P-256 public key for ES256 in COSE_Key form (RFC 9052 §7, RFC 9053 §7.1.1; WebAuthn §6.5.1.1),
/// as carried in attested credential data:
///
/// `{1 (kty): 2 (EC2), 3 (alg): -7 (ES256), -1 (crv): 1 (P-256), -2 (x): bstr 32, -3 (y): bstr 32}`
///
/// Other key types, curves and algorithms are rejected with a code saying which; other map keys are
/// ignored. The point is checked to be on the curve when the key is created.
public struct COSEKey: CTAP2CBORCodable {
    /// COSE key type EC2.
    public static let keyTypeEC2 = 2
    /// COSE elliptic curve P-256.
    public static let curveP256 = 1

    /// The public key.
    public let publicKey: P256.Signing.PublicKey

    /// Wraps a swift-crypto public key.
    public init(publicKey: P256.Signing.PublicKey) {
        self.publicKey = publicKey
    }

    /// Creates a key from its affine coordinates.
    ///
    /// - Throws: ``CTAP2Error/Code/invalidLength`` unless both are 32 bytes,
    ///   ``CTAP2Error/Code/invalidPublicKey`` when the point is not on P-256.
    public init(x: [UInt8], y: [UInt8]) throws(CTAP2Error) {
        guard x.count == 32, y.count == 32 else {
            throw CTAP2Error(.invalidLength, "COSE_Key x and y must be 32 bytes, found \(x.count) and \(y.count)")
        }
        try self.init(x963Representation: [0x04] + x + y)
    }

    /// Creates a key from its X9.62 uncompressed form `04 ‖ x ‖ y` (65 bytes).
    ///
    /// - Throws: ``CTAP2Error/Code/invalidPublicKey`` when the bytes are not a point on P-256.
    public init(x963Representation: [UInt8]) throws(CTAP2Error) {
        do {
            publicKey = try P256.Signing.PublicKey(x963Representation: x963Representation)
        } catch {
            throw CTAP2Error(.invalidPublicKey, "not an uncompressed P-256 point on the curve")
        }
    }

    public init(cbor: CBORValue) throws(CTAP2Error) {
        let fields = try CBORFields(cbor, context: "COSE_Key")
        let kty = try fields.required(1, "kty", .int)
        guard kty == Self.keyTypeEC2 else {
            throw CTAP2Error(.unsupportedKeyType, "COSE_Key kty \(kty) is not EC2 (2)")
        }
        let alg = COSEAlgorithmIdentifier(rawValue: try fields.required(3, "alg", .int))
        guard alg == .es256 else {
            throw CTAP2Error(.unsupportedAlgorithm, "COSE_Key alg \(alg) is not ES256 (-7)")
        }
        let crv = try fields.required(-1, "crv", .int)
        guard crv == Self.curveP256 else {
            throw CTAP2Error(.unsupportedCurve, "COSE_Key crv \(crv) is not P-256 (1)")
        }
        let x = try fields.required(-2, "x", .bytes(count: 32))
        let y = try fields.required(-3, "y", .bytes(count: 32))
        try self.init(x: x, y: y)
    }

    /// Decodes a COSE_Key from bytes; `requireCanonical: false` accepts keys from authenticators
    /// that do not sort map keys.
    public init(bytes: some Collection<UInt8>, requireCanonical: Bool) throws(CTAP2Error) {
        let value: CBORValue
        do {
            value = try CBOR.decode(bytes, options: CBORDecodingOptions(requireCanonical: requireCanonical))
        } catch {
            throw CTAP2Error(cbor: error, in: "COSE_Key")
        }
        try self.init(cbor: value)
    }

    /// The X9.62 uncompressed point `04 ‖ x ‖ y`.
    public var x963Representation: [UInt8] { Array(publicKey.x963Representation) }
    /// The x coordinate (32 bytes, big-endian).
    public var x: [UInt8] { Array(x963Representation[1..<33]) }
    /// The y coordinate (32 bytes, big-endian).
    public var y: [UInt8] { Array(x963Representation[33..<65]) }

    public var cbor: CBORValue {
        [
            1: .int(Self.keyTypeEC2),
            3: .int(COSEAlgorithmIdentifier.es256.rawValue),
            -1: .int(Self.curveP256),
            -2: .bytes(x),
            -3: .bytes(y),
        ]
    }

    public static func == (lhs: COSEKey, rhs: COSEKey) -> Bool {
        lhs.publicKey.rawRepresentation == rhs.publicKey.rawRepresentation
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(Array(publicKey.rawRepresentation))
    }
}
