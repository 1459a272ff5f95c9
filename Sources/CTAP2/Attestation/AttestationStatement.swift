/// An attestation statement this module understands, read from a response's `fmt` and `attStmt`
/// (WebAuthn §8 "Defined Attestation Statement Formats").
public enum AttestationStatement: Hashable, Sendable {
    /// `"none"` (WebAuthn §8.7): `attStmt` is the empty map.
    case none
    /// `"packed"` (WebAuthn §8.2): `{"alg": int, "sig": bstr, "x5c"?: [bstr]}`. Without `x5c` this is
    /// self attestation, signed by the credential key itself.
    case packed(alg: COSEAlgorithmIdentifier, sig: [UInt8], x5c: [[UInt8]]?)

    /// The `fmt` value `"none"`.
    public static let noneFormat = "none"
    /// The `fmt` value `"packed"`.
    public static let packedFormat = "packed"

    /// Reads a statement.
    ///
    /// - Throws: ``CTAP2Error/Code/unsupportedAttestation`` for another `fmt` or an ECDAA statement,
    ///   ``CTAP2Error/Code/invalidAttestation`` for a non-empty `"none"` statement, and
    ///   ``CTAP2Error/Code/missingField`` / ``CTAP2Error/Code/wrongType`` for packed fields.
    public init(fmt: String, attStmt: [String: CBORValue]) throws(CTAP2Error) {
        switch fmt {
        case Self.noneFormat:
            guard attStmt.isEmpty else {
                throw CTAP2Error(.invalidAttestation, "\"none\" attestation statement must be empty, has \(attStmt.count) entries")
            }
            self = .none
        case Self.packedFormat:
            guard attStmt["ecdaaKeyId"] == nil else {
                throw CTAP2Error(.unsupportedAttestation, "ECDAA packed attestation is not supported")
            }
            let fields = try CBORFields(.textMap(attStmt), context: "packed attestation statement")
            let alg = try fields.required("alg", "alg", .int)
            let sig = try fields.required("sig", "sig", .bytes)
            let x5c = try fields.optional("x5c", "x5c", .array(of: .bytes))
            self = .packed(alg: COSEAlgorithmIdentifier(rawValue: alg), sig: sig, x5c: x5c)
        default:
            throw CTAP2Error(.unsupportedAttestation, "attestation format \"\(fmt)\" is not supported")
        }
    }

    /// The `fmt` identifier.
    public var fmt: String {
        switch self {
        case .none: return Self.noneFormat
        case .packed: return Self.packedFormat
        }
    }

    /// The `attStmt` map.
    public var attStmt: [String: CBORValue] {
        switch self {
        case .none:
            return [:]
        case .packed(let alg, let sig, let x5c):
            var map: [String: CBORValue] = ["alg": .int(alg.rawValue), "sig": .bytes(sig)]
            if let x5c { map["x5c"] = .array(x5c.map { .bytes($0) }) }
            return map
        }
    }
}

/// What a verified attestation proves (WebAuthn §6.5.4 "Attestation Types").
public enum AttestationType: String, Hashable, Sendable {
    /// No attestation (`"none"`): nothing about the authenticator model is proven.
    case none
    /// Self attestation: the credential key signed its own creation; proves possession only.
    case selfAttestation = "self"
    /// Basic (or AttCA: a verifier cannot tell them apart) attestation with trust path `x5c`: an
    /// attestation certificate's key signed the creation, and the certificate names the
    /// authenticator model. Whether its chain is trusted is ``VerifiedAttestation/trust``.
    case basic
}
