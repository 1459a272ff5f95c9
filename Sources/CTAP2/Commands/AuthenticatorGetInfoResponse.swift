/// The response to `authenticatorGetInfo` (CTAP 2.2 §6.4). Hybrid phones send it inside the
/// post-handshake message (PROTOCOL.md §7.1) and the desktop answers later getInfo requests from it.
///
/// Modelled keys: 0x01 versions, 0x02 extensions?, 0x03 aaguid, 0x04 options?, 0x05 maxMsgSize?,
/// 0x06 pinUvAuthProtocols?, 0x07 maxCredentialCountInList?, 0x08 maxCredentialIdLength?,
/// 0x09 transports?, 0x0A algorithms?, 0x0E firmwareVersion?, 0x14 remainingDiscoverableCredentials?,
/// 0x16 attestationFormats?. Other keys are ignored. ``init(cbor:)`` reads strictly;
/// ``init(cbor:reading:)`` with ``Reading/chromium`` reads as Chromium's desktop does.
///
/// Chromium phones send `{1: ["FIDO_2_0", "FIDO_2_1"], 2: ["prf"], 3: 16×00, 4: {"rk": true, "uv": true},
/// 9: ["cable", "hybrid", "internal"]}`.
public struct AuthenticatorGetInfoResponse: CTAP2CBORCodable {
    /// Supported versions (`"FIDO_2_0"`, `"FIDO_2_1"`, `"U2F_V2"`, …), in the authenticator's order.
    public var versions: [String]
    /// Supported extension identifiers.
    public var extensions: [String]?
    /// The authenticator model's AAGUID (16 bytes).
    public var aaguid: [UInt8]
    /// Options (`rk`, `uv`, `up`, `plat`, `clientPin`, …) and their values.
    public var options: [String: Bool]?
    /// Maximum message size.
    public var maxMsgSize: Int?
    /// Supported PIN/UV auth protocols.
    public var pinUvAuthProtocols: [Int]?
    /// Maximum number of credentials in an allow or exclude list.
    public var maxCredentialCountInList: Int?
    /// Maximum credential ID length.
    public var maxCredentialIdLength: Int?
    /// Supported transports (`"internal"`, `"hybrid"`, `"cable"`, …), in the authenticator's order.
    public var transports: [String]?
    /// Supported credential algorithms, most preferred first.
    public var algorithms: [PublicKeyCredentialParameters]?
    /// Firmware version.
    public var firmwareVersion: Int?
    /// Estimated number of further discoverable credentials that fit.
    public var remainingDiscoverableCredentials: Int?
    /// Supported attestation statement formats (CTAP 2.2).
    public var attestationFormats: [String]?

    /// Creates a getInfo response.
    public init(
        versions: [String],
        extensions: [String]? = nil,
        aaguid: [UInt8],
        options: [String: Bool]? = nil,
        maxMsgSize: Int? = nil,
        pinUvAuthProtocols: [Int]? = nil,
        maxCredentialCountInList: Int? = nil,
        maxCredentialIdLength: Int? = nil,
        transports: [String]? = nil,
        algorithms: [PublicKeyCredentialParameters]? = nil,
        firmwareVersion: Int? = nil,
        remainingDiscoverableCredentials: Int? = nil,
        attestationFormats: [String]? = nil
    ) {
        self.versions = versions
        self.extensions = extensions
        self.aaguid = aaguid
        self.options = options
        self.maxMsgSize = maxMsgSize
        self.pinUvAuthProtocols = pinUvAuthProtocols
        self.maxCredentialCountInList = maxCredentialCountInList
        self.maxCredentialIdLength = maxCredentialIdLength
        self.transports = transports
        self.algorithms = algorithms
        self.firmwareVersion = firmwareVersion
        self.remainingDiscoverableCredentials = remainingDiscoverableCredentials
        self.attestationFormats = attestationFormats
    }

    /// How a getInfo response is read.
    public enum Reading: Sendable {
        /// Every modelled member must have its CTAP 2.2 type (options all booleans, algorithms all
        /// `PublicKeyCredentialParameters`): for checking an authenticator.
        case strict
        /// As Chromium's `ReadCTAPGetInfoResponse` reads it, which a desktop answering getInfo from
        /// a phone's post-handshake message depends on: options it does not read as booleans and
        /// algorithm entries of another type than `"public-key"` (or beyond 32 bits) are skipped,
        /// `defaultCredProtect` must be 2 or 3, and members it never reads (firmwareVersion,
        /// attestationFormats) are dropped when malformed instead of refused.
        case chromium
    }

    public init(cbor: CBORValue) throws(CTAP2Error) {
        try self.init(cbor: cbor, reading: .strict)
    }

    /// Decodes a getInfo response the way `reading` says.
    public init(cbor: CBORValue, reading: Reading) throws(CTAP2Error) {
        let fields = try CBORFields(cbor, context: "authenticatorGetInfo response")
        versions = try fields.required(0x01, "versions", .array(of: .text))
        extensions = try fields.optional(0x02, "extensions", .array(of: .text))
        aaguid = try fields.required(0x03, "aaguid", .bytes(count: 16))
        maxMsgSize = try fields.optional(0x05, "maxMsgSize", .unsigned)
        pinUvAuthProtocols = try fields.optional(0x06, "pinUvAuthProtocols", .array(of: .unsigned))
        maxCredentialCountInList = try fields.optional(0x07, "maxCredentialCountInList", .unsigned)
        maxCredentialIdLength = try fields.optional(0x08, "maxCredentialIdLength", .unsigned)
        transports = try fields.optional(0x09, "transports", .array(of: .text))
        remainingDiscoverableCredentials = try fields.optional(0x14, "remainingDiscoverableCredentials", .unsigned)
        switch reading {
        case .strict:
            options = try fields.optional(0x04, "options", .textKeyedMap).map { (raw) throws(CTAP2Error) in
                var options: [String: Bool] = [:]
                for (name, value) in raw {
                    options[name] = try CBORKind.bool.convert(value, "authenticatorGetInfo response 0x04 (options) \"\(name)\"")
                }
                return options
            }
            algorithms = try fields.optional(0x0A, "algorithms", .array(of: .structure))
            firmwareVersion = try fields.optional(0x0E, "firmwareVersion", .unsigned)
            attestationFormats = try fields.optional(0x16, "attestationFormats", .array(of: .text))
        case .chromium:
            options = try Self.options(fields.entries[0x04])
            algorithms = try Self.algorithms(fields.entries[0x0A])
            firmwareVersion = try? fields.optional(0x0E, "firmwareVersion", .unsigned)
            attestationFormats = try? fields.optional(0x16, "attestationFormats", .array(of: .text))
        }
    }

    /// The options Chromium reads as booleans (`ReadCTAPGetInfoResponse`): one of these with
    /// another type is refused, as there.
    private static let booleanOptions: Set<String> = [
        "plat", "rk", "up", "uv", "clientPin", "credMgmt", "credentialMgmtPreview", "bioEnroll",
        "userVerificationMgmtPreview", "pinUvAuthToken", "ep", "largeBlobs", "alwaysUv", "makeCredUvNotRqd",
    ]

    /// Key 0x04 read as Chromium reads it: a map, in which the boolean options it knows must be
    /// booleans and `defaultCredProtect` 2 or 3; every other entry (a text key with a value of
    /// another type, a key that is not text) is skipped, as Chromium looks up only what it knows.
    private static func options(_ value: CBORValue?) throws(CTAP2Error) -> [String: Bool]? {
        guard let value else { return nil }
        let path = "authenticatorGetInfo response 0x04 (options)"
        guard case .map(let entries) = value else {
            throw CTAP2Error(.wrongType, "\(path): expected a map, found \(value.kindName)")
        }
        var options: [String: Bool] = [:]
        // In canonical order, so that of two keys that are one name in different Unicode
        // normalization forms (one to a Swift dictionary) the first is kept, name and value.
        for (key, entry) in CBOR.canonicallySorted(entries) {
            guard case .text(let name) = key else { continue }
            // Checked before the booleans: Chromium refuses a boolean there too.
            if name == "defaultCredProtect" {
                guard entry == .unsigned(2) || entry == .unsigned(3) else {
                    throw CTAP2Error(.invalidValue, "\(path) \"defaultCredProtect\": expected 2 or 3, found \(entry)")
                }
            } else if case .bool(let flag) = entry {
                if options[name] == nil { options[name] = flag }
            } else if booleanOptions.contains(name) {
                throw CTAP2Error(.wrongType, "\(path) \"\(name)\": expected a boolean, found \(entry.kindName)")
            }
        }
        return options
    }

    /// Key 0x0A read as Chromium reads it: every entry a map with a text `type`; entries of another
    /// type than `"public-key"` are skipped, a `"public-key"` one needs an integer `alg`, and one
    /// outside 32 bits is skipped.
    private static func algorithms(_ value: CBORValue?) throws(CTAP2Error) -> [PublicKeyCredentialParameters]? {
        guard let value else { return nil }
        let path = "authenticatorGetInfo response 0x0A (algorithms)"
        let elements = try CBORKind<[CBORValue]>.array.convert(value, path)
        var algorithms: [PublicKeyCredentialParameters] = []
        for (index, element) in elements.enumerated() {
            let fields = try CBORFields(element, context: "\(path)[\(index)]")
            let type = try fields.required("type", "type", .text)
            guard type == PublicKeyCredentialDescriptor.publicKeyType else { continue }
            let alg = try fields.required("alg", "alg", .int)
            guard Int(Int32.min)...Int(Int32.max) ~= alg else { continue }
            algorithms.append(PublicKeyCredentialParameters(type: type, alg: COSEAlgorithmIdentifier(rawValue: alg)))
        }
        return algorithms
    }

    public var cbor: CBORValue {
        var map: [CBORValue: CBORValue] = [0x01: .textArray(versions), 0x03: .bytes(aaguid)]
        if let extensions { map[0x02] = .textArray(extensions) }
        if let options { map[0x04] = .textMap(options.mapValues { .bool($0) }) }
        if let maxMsgSize { map[0x05] = .int(maxMsgSize) }
        if let pinUvAuthProtocols { map[0x06] = .array(pinUvAuthProtocols.map { .int($0) }) }
        if let maxCredentialCountInList { map[0x07] = .int(maxCredentialCountInList) }
        if let maxCredentialIdLength { map[0x08] = .int(maxCredentialIdLength) }
        if let transports { map[0x09] = .textArray(transports) }
        if let algorithms { map[0x0A] = .array(algorithms.map(\.cbor)) }
        if let firmwareVersion { map[0x0E] = .int(firmwareVersion) }
        if let remainingDiscoverableCredentials { map[0x14] = .int(remainingDiscoverableCredentials) }
        if let attestationFormats { map[0x16] = .textArray(attestationFormats) }
        return .map(map)
    }
}
