import Crypto

/// Authenticator data (WebAuthn §6.1): the bytes an authenticator signs, together with the client
/// data hash, in attestation and assertion signatures.
///
/// Layout: `rpIdHash (32) ‖ flags (1) ‖ signCount (u32 BE) ‖ attestedCredentialData? ‖ extensions?`.
///
/// Parsing is strict: lengths must add up, the AT and ED flags must match the data present, the
/// extensions map must be canonical CBOR, and nothing may follow it. Because of that,
/// ``bytes`` reproduces parsed input exactly.
public struct AuthenticatorData: Hashable, Sendable {
    /// SHA-256 of the RP ID (32 bytes).
    public let rpIdHash: [UInt8]
    /// The flags. AT and ED always agree with ``attestedCredentialData`` and ``extensions``.
    public let flags: AuthenticatorDataFlags
    /// The signature counter (0 when the authenticator does not keep one, as for synced passkeys).
    public let signCount: UInt32
    /// The new credential, present in makeCredential responses (AT flag).
    public let attestedCredentialData: AttestedCredentialData?
    /// Authenticator extension outputs by extension identifier (ED flag).
    public let extensions: [String: CBORValue]?

    /// Creates authenticator data. The AT and ED flags are set or cleared to match
    /// `attestedCredentialData` and `extensions`; other flags are taken from `flags`.
    ///
    /// - Throws: ``CTAP2Error/Code/invalidLength`` unless `rpIdHash` is 32 bytes.
    public init(
        rpIdHash: [UInt8],
        flags: AuthenticatorDataFlags,
        signCount: UInt32,
        attestedCredentialData: AttestedCredentialData? = nil,
        extensions: [String: CBORValue]? = nil
    ) throws(CTAP2Error) {
        guard rpIdHash.count == 32 else {
            throw CTAP2Error(.invalidLength, "rpIdHash must be 32 bytes, found \(rpIdHash.count)")
        }
        var flags = flags
        flags.remove([.attestedCredentialData, .extensionData])
        if attestedCredentialData != nil { flags.insert(.attestedCredentialData) }
        if extensions != nil { flags.insert(.extensionData) }
        self.rpIdHash = rpIdHash
        self.flags = flags
        self.signCount = signCount
        self.attestedCredentialData = attestedCredentialData
        self.extensions = extensions
    }

    /// Creates authenticator data for `rpId`, hashing it with SHA-256.
    public init(
        rpId: String,
        flags: AuthenticatorDataFlags,
        signCount: UInt32,
        attestedCredentialData: AttestedCredentialData? = nil,
        extensions: [String: CBORValue]? = nil
    ) {
        var flags = flags
        flags.remove([.attestedCredentialData, .extensionData])
        if attestedCredentialData != nil { flags.insert(.attestedCredentialData) }
        if extensions != nil { flags.insert(.extensionData) }
        self.rpIdHash = Self.rpIdHash(for: rpId)
        self.flags = flags
        self.signCount = signCount
        self.attestedCredentialData = attestedCredentialData
        self.extensions = extensions
    }

    /// SHA-256 of the UTF-8 RP ID, the value relying parties compare ``rpIdHash`` with.
    public static func rpIdHash(for rpId: String) -> [UInt8] {
        Array(SHA256.hash(data: Array(rpId.utf8)))
    }

    /// Parses authenticator data.
    ///
    /// - Throws: ``CTAP2Error/Code/invalidLength`` when the input is shorter than 37 bytes or a length
    ///   runs past the end; ``CTAP2Error/Code/inconsistentFlags`` when AT or ED is set with no data
    ///   for it; ``CTAP2Error/Code/trailingBytes`` when bytes are left over;
    ///   ``CTAP2Error/Code/invalidCBOR`` / ``CTAP2Error/Code/wrongType`` for a bad COSE key or
    ///   extensions map.
    public init(bytes input: some Collection<UInt8>) throws(CTAP2Error) {
        let bytes = Array(input)
        guard bytes.count >= 37 else {
            throw CTAP2Error(.invalidLength, "authenticator data: \(bytes.count) bytes, need at least 37")
        }
        rpIdHash = Array(bytes[0..<32])
        flags = AuthenticatorDataFlags(rawValue: bytes[32])
        signCount = bytes[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        var cursor = 37

        if flags.contains(.attestedCredentialData) {
            guard cursor < bytes.count else {
                throw CTAP2Error(.inconsistentFlags, "authenticator data: AT flag set but no attested credential data")
            }
            let (data, used) = try AttestedCredentialData.parse(bytes[cursor...])
            attestedCredentialData = data
            cursor += used
        } else {
            attestedCredentialData = nil
        }

        if flags.contains(.extensionData) {
            guard cursor < bytes.count else {
                throw CTAP2Error(.inconsistentFlags, "authenticator data: ED flag set but no extensions")
            }
            let value: CBORValue
            do {
                value = try CBOR.decode(bytes[cursor...])
            } catch {
                if error.code == .trailingBytes {
                    throw CTAP2Error(.trailingBytes, "authenticator data: bytes after the extensions map")
                }
                throw CTAP2Error(cbor: error, in: "authenticator data extensions")
            }
            extensions = try CBORKind.textKeyedMap.convert(value, "authenticator data extensions")
        } else {
            guard cursor == bytes.count else {
                let count = bytes.count - cursor
                if flags.contains(.attestedCredentialData) {
                    throw CTAP2Error(.trailingBytes, "authenticator data: \(count) bytes after the credential public key with ED flag clear")
                }
                throw CTAP2Error(
                    .trailingBytes,
                    "authenticator data: \(count) bytes after signCount with both AT and ED clear "
                        + "(attested credential data needs the AT flag, extensions the ED flag)")
            }
            extensions = nil
        }
    }

    /// The byte form, exactly as parsed when created with ``init(bytes:)``.
    public var bytes: [UInt8] {
        var out = rpIdHash
        out.append(flags.rawValue)
        out.append(contentsOf: [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: signCount >> $0) })
        if let attestedCredentialData { out.append(contentsOf: attestedCredentialData.bytes) }
        if let extensions { out.append(contentsOf: CBOR.encode(.textMap(extensions))) }
        return out
    }

    /// UP: the user was present.
    public var userPresent: Bool { flags.contains(.userPresent) }
    /// UV: the user was verified.
    public var userVerified: Bool { flags.contains(.userVerified) }
}
