/// The attested credential data inside authenticator data when the AT flag is set
/// (WebAuthn §6.5.2): `aaguid (16) ‖ credentialIdLength (u16 BE) ‖ credentialId ‖ credentialPublicKey`.
public struct AttestedCredentialData: Hashable, Sendable {
    /// The largest credential ID WebAuthn relying parties accept (WebAuthn §7.1 step 28).
    public static let maximumCredentialIdLength = 1023

    /// The authenticator model's AAGUID (16 bytes; all zero for Chromium phones).
    public let aaguid: [UInt8]
    /// The credential ID.
    public let credentialId: [UInt8]
    /// The credential public key exactly as encoded: one COSE_Key CBOR map.
    /// Decode it with ``coseKey()``.
    public let credentialPublicKey: [UInt8]

    /// Creates attested credential data with an ES256 key.
    ///
    /// - Throws: ``CTAP2Error/Code/invalidLength`` for an AAGUID that is not 16 bytes or a
    ///   credential ID longer than ``maximumCredentialIdLength``.
    public init(aaguid: [UInt8], credentialId: [UInt8], credentialPublicKey: COSEKey) throws(CTAP2Error) {
        try self.init(aaguid: aaguid, credentialId: credentialId, credentialPublicKeyBytes: credentialPublicKey.encode())
    }

    /// Creates attested credential data with an already encoded COSE_Key of any algorithm.
    ///
    /// - Throws: ``CTAP2Error/Code/invalidLength`` as above; ``CTAP2Error/Code/invalidCBOR``,
    ///   ``CTAP2Error/Code/wrongType`` or ``CTAP2Error/Code/trailingBytes`` unless the bytes are
    ///   exactly one CBOR map.
    public init(aaguid: [UInt8], credentialId: [UInt8], credentialPublicKeyBytes: [UInt8]) throws(CTAP2Error) {
        guard aaguid.count == 16 else {
            throw CTAP2Error(.invalidLength, "AAGUID must be 16 bytes, found \(aaguid.count)")
        }
        guard credentialId.count <= Self.maximumCredentialIdLength else {
            throw CTAP2Error(.invalidLength, "credential ID of \(credentialId.count) bytes exceeds 1023")
        }
        let length = try Self.coseKeyLength(credentialPublicKeyBytes)
        guard length == credentialPublicKeyBytes.count else {
            throw CTAP2Error(.trailingBytes, "credential public key: bytes after the COSE_Key map")
        }
        self.aaguid = aaguid
        self.credentialId = credentialId
        self.credentialPublicKey = credentialPublicKeyBytes
    }

    /// Parses attested credential data at the start of `bytes`; returns it and the bytes it used.
    static func parse(_ bytes: ArraySlice<UInt8>) throws(CTAP2Error) -> (AttestedCredentialData, Int) {
        var cursor = bytes.startIndex
        guard bytes.count >= 18 else {
            throw CTAP2Error(.invalidLength, "attested credential data: \(bytes.count) bytes, need at least 18")
        }
        let aaguid = Array(bytes[cursor..<cursor + 16])
        cursor += 16
        let idLength = Int(bytes[cursor]) << 8 | Int(bytes[cursor + 1])
        cursor += 2
        guard idLength <= Self.maximumCredentialIdLength else {
            throw CTAP2Error(.invalidLength, "credential ID length \(idLength) exceeds 1023")
        }
        guard bytes.endIndex - cursor >= idLength else {
            throw CTAP2Error(.invalidLength, "credential ID length \(idLength) runs past the end")
        }
        let credentialId = Array(bytes[cursor..<cursor + idLength])
        cursor += idLength
        let keyLength = try coseKeyLength(bytes[cursor...])
        let key = Array(bytes[cursor..<cursor + keyLength])
        cursor += keyLength
        let data = AttestedCredentialData(aaguid: aaguid, credentialId: credentialId, validatedKey: key)
        return (data, cursor - bytes.startIndex)
    }

    private init(aaguid: [UInt8], credentialId: [UInt8], validatedKey: [UInt8]) {
        self.aaguid = aaguid
        self.credentialId = credentialId
        self.credentialPublicKey = validatedKey
    }

    /// The length of the CBOR map at the start of `bytes` (any well-formed CBOR map: non-canonical
    /// COSE keys are kept byte for byte rather than rejected).
    private static func coseKeyLength(_ bytes: some Collection<UInt8>) throws(CTAP2Error) -> Int {
        guard !bytes.isEmpty else {
            throw CTAP2Error(.invalidLength, "attested credential data ends before the credential public key")
        }
        let prefix: (value: CBORValue, length: Int)
        do {
            prefix = try CBOR.decodePrefix(bytes, options: CBORDecodingOptions(requireCanonical: false))
        } catch {
            throw CTAP2Error(cbor: error, in: "credential public key")
        }
        guard case .map = prefix.value else {
            throw CTAP2Error(.wrongType, "credential public key: expected a COSE_Key map, found \(prefix.value.kindName)")
        }
        return prefix.length
    }

    /// The byte form: `aaguid ‖ u16 BE length ‖ credentialId ‖ credentialPublicKey`.
    public var bytes: [UInt8] {
        let length = credentialId.count
        return aaguid + [UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length)]
            + credentialId + credentialPublicKey
    }

    /// The credential public key as an ES256 ``COSEKey``.
    ///
    /// - Throws: the ``COSEKey`` decoding errors (other key types and algorithms are unsupported).
    public func coseKey() throws(CTAP2Error) -> COSEKey {
        try COSEKey(bytes: credentialPublicKey, requireCanonical: false)
    }
}
