import HybridRuntime

/// `PublicKeyCredentialRequestOptionsJSON` (WebAuthn L3 §5.1.1, as `PublicKeyCredential.parseRequestOptionsFromJSON`
/// reads it): what a relying party's server sends to start an authentication. py_webauthn's
/// `options_to_json` and SimpleWebAuthn's `generateAuthenticationOptions` emit this shape.
///
/// Read with ``parse(_:)``, which ignores unknown members and `extensions`.
public struct PublicKeyCredentialRequestOptionsJSON: Hashable, Sendable, Codable {
    /// The challenge.
    public var challenge: Base64URLBytes
    /// The ceremony timeout in milliseconds (a hint).
    public var timeout: Int?
    /// The RP ID; absent means the origin's effective domain.
    public var rpId: String?
    /// The credentials the relying party accepts; absent or empty for a discoverable sign-in.
    public var allowCredentials: [PublicKeyCredentialDescriptorJSON]?
    /// `"discouraged"`, `"preferred"` or `"required"`.
    public var userVerification: String?
    /// Client hints (`"security-key"`, `"client-device"`, `"hybrid"`).
    public var hints: [String]?

    /// Creates options, for example the built-in relying party's own.
    public init(
        challenge: [UInt8],
        timeout: Int? = 60_000,
        rpId: String?,
        allowCredentials: [PublicKeyCredentialDescriptorJSON]? = nil,
        userVerification: String? = "preferred",
        hints: [String]? = nil
    ) {
        self.challenge = Base64URLBytes(challenge)
        self.timeout = timeout
        self.rpId = rpId
        self.allowCredentials = allowCredentials
        self.userVerification = userVerification
        self.hints = hints
    }

    /// Reads and validates options JSON (UTF-8).
    ///
    /// - Throws: ``WebAuthnJSONError`` — `missingChallenge`, `invalidBase64URL`, `missingMember`,
    ///   `wrongType`, `invalidValue` or `invalidJSON`, naming the member.
    public static func parse(_ json: some Collection<UInt8>) throws(WebAuthnJSONError) -> Self {
        let options = try WebAuthnJSONCoding.decode(Self.self, from: json)
        try options.validate()
        return options
    }

    /// Checks what decoding alone does not.
    public func validate() throws(WebAuthnJSONError) { try validate(at: "") }

    /// Checks what decoding alone does not; messages name members with `path` before them
    /// (`publicKey.` for options inside a wrapper).
    func validate(at path: String) throws(WebAuthnJSONError) {
        guard !challenge.bytes.isEmpty else {
            throw WebAuthnJSONError(.missingChallenge, "\"\(path)challenge\" is empty")
        }
        if let rpId {
            try WebAuthnOrigin.checkRpId(rpId, member: "\(path)rpId")
        }
        for (index, descriptor) in (allowCredentials ?? []).enumerated() where descriptor.id.bytes.isEmpty {
            throw WebAuthnJSONError(.invalidValue, "\(path)allowCredentials[\(index)].id is empty")
        }
        // WebAuthn §5.1.4.2: descriptors of other types are skipped, and an authenticator whose
        // list is then empty is not asked at all; the list did not ask for "any passkey".
        if let given = allowCredentials, !given.isEmpty, allowCredentialIds.isEmpty {
            let types = Set(given.map(\.type)).sorted().map { "\"\($0)\"" }.joined(separator: ", ")
            throw WebAuthnJSONError(
                .invalidValue,
                "\(path)allowCredentials names no \"public-key\" credential (only \(types)): a browser skips them all and asks no authenticator")
        }
        // A browser offers the transports the allow list names (Chromium's
        // GetTransportsAllowedByRP: the union of every entry's transports; an entry without any
        // allows all): when none is hybrid, it shows no QR code, and no phone is asked.
        // Values a browser does not know are dropped first (Chromium's converter knows usb, nfc,
        // ble, cable, hybrid and internal): an entry left with none allows every transport.
        let known: Set<String> = ["usb", "nfc", "ble", "cable", "hybrid", "internal"]
        let listed = (allowCredentials ?? []).filter { $0.type == "public-key" }.map { ($0.transports ?? []).filter(known.contains) }
        if !listed.isEmpty, !listed.contains(where: \.isEmpty),
            !listed.contains(where: { $0.contains("hybrid") || $0.contains("cable") })
        {
            let named = Set(listed.flatMap { $0 }).sorted().map { "\"\(PeerText.printable($0, limit: 20))\"" }.joined(separator: ", ")
            throw WebAuthnJSONError(
                .invalidValue,
                "every \(path)allowCredentials entry names its transports, and none is \"hybrid\" (only \(named)): a browser "
                    + "then offers no phone or QR code for the sign-in (Chromium's GetTransportsAllowedByRP); a passkey on a phone "
                    + "is listed with \"hybrid\" (or without transports)")
        }
    }

    /// The IDs of the allowed `"public-key"` credentials (descriptors of other types are skipped).
    public var allowCredentialIds: [[UInt8]] {
        (allowCredentials ?? []).filter { $0.type == "public-key" }.map(\.id.bytes)
    }

    /// `userVerification` in effect: `"preferred"` when absent or unknown.
    public var effectiveUserVerification: String { UserVerification.normalized(userVerification) }
}
