/// The response to `authenticatorMakeCredential`: an attestation object (CTAP 2.2 §6.1.3).
///
/// | key | field |
/// | --- | --- |
/// | 0x01 | fmt (tstr) |
/// | 0x02 | authData (bstr, parsed into ``AuthenticatorData``) |
/// | 0x03 | attStmt (map) |
/// | 0x04 | epAtt? (bool) |
/// | 0x05 | largeBlobKey? (bstr) |
/// | 0x06 | unsignedExtensionOutputs? (map) |
///
/// Chromium phones send `{1, 2, 3, 6?: {"prf": {"enabled": true}}}` (PROTOCOL.md §8.2).
/// Build and verify attestation with ``none(authData:)``, ``packedSelf(authData:clientDataHash:privateKey:)``
/// and ``verifyAttestation(clientDataHash:)``.
public struct MakeCredentialResponse: CTAP2CBORCodable {
    /// The attestation statement format identifier (`"none"`, `"packed"`, …).
    public var fmt: String
    /// The authenticator data, which must hold attested credential data.
    public var authData: AuthenticatorData
    /// The attestation statement, whose shape depends on ``fmt``.
    public var attStmt: [String: CBORValue]
    /// Whether an enterprise attestation was returned.
    public var epAtt: Bool?
    /// The large-blob key of the credential.
    public var largeBlobKey: [UInt8]?
    /// Extension outputs that are not signed (CTAP 2.2).
    public var unsignedExtensionOutputs: [String: CBORValue]?

    /// Creates a response.
    public init(
        fmt: String,
        authData: AuthenticatorData,
        attStmt: [String: CBORValue],
        epAtt: Bool? = nil,
        largeBlobKey: [UInt8]? = nil,
        unsignedExtensionOutputs: [String: CBORValue]? = nil
    ) {
        self.fmt = fmt
        self.authData = authData
        self.attStmt = attStmt
        self.epAtt = epAtt
        self.largeBlobKey = largeBlobKey
        self.unsignedExtensionOutputs = unsignedExtensionOutputs
    }

    public init(cbor: CBORValue) throws(CTAP2Error) {
        let fields = try CBORFields(cbor, context: "authenticatorMakeCredential response")
        fmt = try fields.required(0x01, "fmt", .text)
        authData = try fields.required(0x02, "authData", .authenticatorData)
        attStmt = try fields.required(0x03, "attStmt", .textKeyedMap)
        epAtt = try fields.optional(0x04, "epAtt", .bool)
        largeBlobKey = try fields.optional(0x05, "largeBlobKey", .bytes)
        unsignedExtensionOutputs = try fields.optional(0x06, "unsignedExtensionOutputs", .textKeyedMap)
        guard authData.attestedCredentialData != nil else {
            throw CTAP2Error(
                .missingField, "authenticatorMakeCredential response: authData has no attested credential data (AT clear)")
        }
    }

    public var cbor: CBORValue {
        var map: [CBORValue: CBORValue] = [
            0x01: .text(fmt),
            0x02: .bytes(authData.bytes),
            0x03: .textMap(attStmt),
        ]
        if let epAtt { map[0x04] = .bool(epAtt) }
        if let largeBlobKey { map[0x05] = .bytes(largeBlobKey) }
        if let unsignedExtensionOutputs { map[0x06] = .textMap(unsignedExtensionOutputs) }
        return .map(map)
    }
}

extension CBORKind where T == AuthenticatorData {
    /// A byte string holding authenticator data.
    static var authenticatorData: CBORKind<AuthenticatorData> {
        CBORKind { (value, path) throws(CTAP2Error) -> AuthenticatorData in
            let bytes = try CBORKind<[UInt8]>.bytes.convert(value, path)
            do throws(CTAP2Error) {
                return try AuthenticatorData(bytes: bytes)
            } catch {
                throw error.inContext(path)
            }
        }
    }
}
