/// `PublicKeyCredentialRpEntity` in options JSON (WebAuthn L3 §5.4.2): `{"id"?, "name"}`.
///
/// `id` may be absent (py_webauthn omits it when not set); the client then uses the origin's
/// effective domain. `name` is required by the specification but tolerated when absent.
public struct PublicKeyCredentialRpEntityJSON: Hashable, Sendable, Codable {
    /// The RP ID.
    public var id: String?
    /// The relying party's human-palatable name.
    public var name: String?

    /// Creates an entity.
    public init(id: String?, name: String?) {
        self.id = id
        self.name = name
    }
}

/// `PublicKeyCredentialUserEntityJSON` (WebAuthn L3 §5.1.1): `{"id": base64url, "name", "displayName"}`.
/// `displayName` is tolerated when absent.
public struct PublicKeyCredentialUserEntityJSON: Hashable, Sendable, Codable {
    /// The user handle (1…64 bytes).
    public var id: Base64URLBytes
    /// The account name, e.g. `alice@example.com`.
    public var name: String
    /// The display name, e.g. `Alice`.
    public var displayName: String?

    /// Creates an entity.
    public init(id: [UInt8], name: String, displayName: String?) {
        self.id = Base64URLBytes(id)
        self.name = name
        self.displayName = displayName
    }
}

/// `PublicKeyCredentialParameters` (WebAuthn L3 §5.3): `{"type": "public-key", "alg": -7}`.
public struct PublicKeyCredentialParametersJSON: Hashable, Sendable, Codable {
    /// The credential type, `"public-key"`.
    public var type: String
    /// The COSE algorithm identifier.
    public var alg: Int

    /// Creates parameters.
    public init(type: String = "public-key", alg: Int) {
        self.type = type
        self.alg = alg
    }

    /// ES256 (`{"type": "public-key", "alg": -7}`), the only algorithm the simulated phone uses.
    public static let es256 = PublicKeyCredentialParametersJSON(alg: -7)
}

/// `PublicKeyCredentialDescriptorJSON` (WebAuthn L3 §5.1.1): `{"id": base64url, "type", "transports"?}`.
/// A missing `type` is read as `"public-key"` (older relying-party libraries leave it out).
public struct PublicKeyCredentialDescriptorJSON: Hashable, Sendable, Codable {
    /// The credential ID.
    public var id: Base64URLBytes
    /// The credential type, `"public-key"`; descriptors of other types are skipped.
    public var type: String
    /// Transport hints (`"hybrid"`, `"internal"`, `"usb"`, …).
    public var transports: [String]?

    /// Creates a descriptor.
    public init(id: [UInt8], type: String = "public-key", transports: [String]? = nil) {
        self.id = Base64URLBytes(id)
        self.type = type
        self.transports = transports
    }

    private enum CodingKeys: String, CodingKey { case id, type, transports }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(Base64URLBytes.self, forKey: .id)
        type = try c.decodeIfPresent(String.self, forKey: .type) ?? "public-key"
        transports = try c.decodeIfPresent([String].self, forKey: .transports)
    }
}

/// `AuthenticatorSelectionCriteria` (WebAuthn L3 §5.4.4). Values are kept as strings: unknown
/// enumeration values are ignored by clients, as WebAuthn requires, rather than rejected.
public struct AuthenticatorSelectionCriteriaJSON: Hashable, Sendable, Codable {
    /// `"platform"` or `"cross-platform"`.
    public var authenticatorAttachment: String?
    /// `"discouraged"`, `"preferred"` or `"required"`.
    public var residentKey: String?
    /// The Level 1 form of `residentKey: "required"`.
    public var requireResidentKey: Bool?
    /// `"discouraged"`, `"preferred"` or `"required"`.
    public var userVerification: String?

    /// Creates criteria.
    public init(
        authenticatorAttachment: String? = nil, residentKey: String? = nil, requireResidentKey: Bool? = nil,
        userVerification: String? = nil
    ) {
        self.authenticatorAttachment = authenticatorAttachment
        self.residentKey = residentKey
        self.requireResidentKey = requireResidentKey
        self.userVerification = userVerification
    }
}

/// `clientExtensionResults`: empty (`{}`) unless `credProps` was requested and answered.
/// Unknown members are ignored when reading.
public struct ClientExtensionResultsJSON: Hashable, Sendable, Codable {
    /// The `credProps` output (WebAuthn L3 §10.1.3).
    public struct CredentialProperties: Hashable, Sendable, Codable {
        /// Whether the credential is discoverable (a passkey).
        public var rk: Bool?
        /// Creates the output.
        public init(rk: Bool?) { self.rk = rk }
    }

    /// `credProps`, when the relying party asked for it.
    public var credProps: CredentialProperties?

    /// No extension outputs.
    public init(credProps: CredentialProperties? = nil) {
        self.credProps = credProps
    }
}

/// The client extension inputs (`extensions` in creation options) this simulator acts on. Reading
/// never fails: other extensions, and values of unexpected types, are ignored.
public struct ClientExtensionInputsJSON: Hashable, Sendable, Codable {
    /// `credProps: true` asks the client to report whether the credential is discoverable.
    public var credProps: Bool?

    /// Creates inputs.
    public init(credProps: Bool? = nil) {
        self.credProps = credProps
    }

    private enum CodingKeys: String, CodingKey { case credProps }

    public init(from decoder: any Decoder) throws {
        let container = try? decoder.container(keyedBy: CodingKeys.self)
        credProps = (try? container?.decodeIfPresent(Bool.self, forKey: .credProps)) ?? nil
    }
}
