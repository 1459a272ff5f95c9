
/// Why a CTAP2 message, authenticator data, COSE key, attestation or client data was rejected.
///
/// Two errors are equal when their ``code`` is, so tests can write
/// `#expect(throws: CTAP2Error(.missingField))`; ``reason`` names the field and the rule.
///
/// This is the *local* failure type of the module. The status byte an authenticator puts in a
/// response is a value, ``CTAP2StatusCode``, never thrown; ``statusCode`` maps a decoding failure to
/// the status an authenticator should answer with.
public struct CTAP2Error: CodedError {
    /// The family of failure.
    public enum Code: String, Hashable, Sendable, CaseIterable {
        /// The bytes are not CTAP2 canonical CBOR (see ``CTAP2Error/cborError``).
        case invalidCBOR
        /// A required map key or JSON member is absent.
        case missingField
        /// A field has the wrong CBOR or JSON type (for example text where bytes are expected).
        case wrongType
        /// A field or structure has the wrong size, or the input ends early.
        case invalidLength
        /// A field has the right type but a value outside what the specification allows.
        case invalidValue
        /// Bytes follow the end of a structure that must span its whole input.
        case trailingBytes
        /// Authenticator data flags (AT, ED) disagree with the data that follows them.
        case inconsistentFlags
        /// A CTAP2 request carries a command byte this module does not model, or has no command byte.
        case unknownCommand
        /// A COSE key's `kty` is not EC2 (2).
        case unsupportedKeyType
        /// A COSE key's curve is not P-256 (1).
        case unsupportedCurve
        /// An algorithm other than ES256 (-7) where only ES256 is supported.
        case unsupportedAlgorithm
        /// A P-256 point is not on the curve or is otherwise unusable.
        case invalidPublicKey
        /// An ES256 signature is malformed DER or does not verify.
        case invalidSignature
        /// An attestation format or variant this module does not verify (unknown `fmt`, ECDAA).
        case unsupportedAttestation
        /// An attestation statement breaks its format's rules.
        case invalidAttestation
        /// A full attestation's certificate chain verified but does not end at a configured trust
        /// anchor, or a certificate of it is outside its validity at the time given.
        case untrustedAttestation
        /// Client data JSON is not well-formed JSON or not a JSON object.
        case invalidJSON
        /// A response's payload was requested but its status is not `CTAP2_OK`.
        case errorStatus
        /// swift-crypto refused to sign.
        case signingFailed
    }

    /// The family of failure.
    public let code: Code
    /// Which field and rule, for people. Never contains key material.
    public let reason: String
    /// The underlying CBOR failure when ``code`` is ``Code/invalidCBOR``.
    public let cborError: CBORError?

    /// An error of `code` with no reason, the value tests match thrown errors against.
    public init(_ code: Code) { self.init(code, "") }

    /// Creates an error.
    public init(_ code: Code, _ reason: String, cborError: CBORError? = nil) {
        self.code = code
        self.reason = reason
        self.cborError = cborError
    }

    /// Wraps a CBOR decoding failure met while reading `what`.
    public init(cbor error: CBORError, in what: String) {
        self.init(.invalidCBOR, "\(what): \(error)", cborError: error)
    }

    public var description: String { "CTAP2 \(code.rawValue): \(reason)" }

    /// The same error with `context` prepended to the reason (used when a nested structure fails).
    func inContext(_ context: String) -> CTAP2Error {
        CTAP2Error(code, "\(context): \(reason)", cborError: cborError)
    }

    /// The status an authenticator answers with when a request fails to decode with this error
    /// (CTAP 2.2 §6 "Status codes"; mirrors Chromium's `CtapDeviceResponseCode` choices).
    public var statusCode: CTAP2StatusCode {
        switch code {
        case .invalidCBOR: return .invalidCBOR
        case .missingField: return .missingParameter
        case .wrongType: return .cborUnexpectedType
        case .invalidLength: return .invalidLength
        case .unknownCommand: return .invalidCommand
        case .unsupportedAlgorithm: return .unsupportedAlgorithm
        case .invalidValue, .trailingBytes, .inconsistentFlags, .unsupportedKeyType, .unsupportedCurve,
            .invalidPublicKey, .invalidSignature, .unsupportedAttestation, .invalidAttestation, .untrustedAttestation,
            .invalidJSON, .errorStatus:
            return .invalidParameter
        case .signingFailed: return .other
        }
    }
}
