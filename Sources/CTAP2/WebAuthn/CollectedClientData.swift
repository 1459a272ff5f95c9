import Crypto

/// WebAuthn client data (WebAuthn L3 §5.8.1 "Client Data Used in WebAuthn Signatures"): the JSON the
/// client (the desktop browser) builds, hashes into `clientDataHash` for the authenticator, and hands
/// to the relying party.
///
/// ``json`` follows the L3 serialization (§5.8.1.1) byte for byte:
/// `{"type":…,"challenge":…,"origin":…,"crossOrigin":false}` (then `"topOrigin":…` if set), no spaces,
/// strings escaped with `CCDToString`. ``init(json:)`` accepts any member order and ignores unknown
/// members (`topOrigin` is read; Android's `other_keys_can_be_added_here` is skipped).
public struct CollectedClientData: Hashable, Sendable {
    /// The ceremony a client data belongs to.
    public struct CeremonyType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The `type` member.
        public let rawValue: String
        /// Wraps a `type` value.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// `"webauthn.create"`: registration (makeCredential).
        public static let create = Self(rawValue: "webauthn.create")
        /// `"webauthn.get"`: authentication (getAssertion).
        public static let get = Self(rawValue: "webauthn.get")
        public var description: String { rawValue }
    }

    /// `type`.
    public var type: CeremonyType
    /// `challenge`: the relying party's challenge bytes (base64url without padding in the JSON).
    public var challenge: [UInt8]
    /// `origin`: the calling origin, e.g. `https://example.com`.
    public var origin: String
    /// `crossOrigin`: whether the call came from a cross-origin iframe (absent in JSON means `false`).
    public var crossOrigin: Bool
    /// `topOrigin`: the top-level origin for a cross-origin call.
    public var topOrigin: String?

    /// Creates client data.
    public init(type: CeremonyType, challenge: [UInt8], origin: String, crossOrigin: Bool = false, topOrigin: String? = nil) {
        self.type = type
        self.challenge = challenge
        self.origin = origin
        self.crossOrigin = crossOrigin
        self.topOrigin = topOrigin
    }

    /// Parses client data JSON (UTF-8), tolerant of member order and unknown members.
    ///
    /// - Throws: ``CTAP2Error/Code/invalidJSON`` for malformed JSON, invalid UTF-8, duplicate members
    ///   or a non-object; ``CTAP2Error/Code/missingField`` for an absent `type`, `challenge` or `origin`;
    ///   ``CTAP2Error/Code/wrongType`` for a member of the wrong JSON type;
    ///   ``CTAP2Error/Code/invalidValue`` for a challenge that is not unpadded base64url.
    public init(json: some Collection<UInt8>) throws(CTAP2Error) {
        guard case .object(let members) = try JSONReader.parse(json) else {
            throw CTAP2Error(.invalidJSON, "client data JSON is not an object")
        }
        func member(_ name: String) -> JSONReader.Value? {
            members.first(where: { Array($0.name.utf8) == Array(name.utf8) })?.value
        }
        func string(_ name: String, required: Bool) throws(CTAP2Error) -> String? {
            guard let value = member(name) else {
                if required { throw CTAP2Error(.missingField, "client data JSON: missing \"\(name)\"") }
                return nil
            }
            guard case .string(let s) = value else {
                throw CTAP2Error(.wrongType, "client data JSON: \"\(name)\" must be a string, found \(value.kindName)")
            }
            return s
        }
        type = CeremonyType(rawValue: try string("type", required: true) ?? "")
        let encodedChallenge = try string("challenge", required: true) ?? ""
        guard let challenge = Base64URL.decodeUnpadded(encodedChallenge) else {
            throw CTAP2Error(.invalidValue, "client data JSON: \"challenge\" is not unpadded base64url")
        }
        self.challenge = challenge
        origin = try string("origin", required: true) ?? ""
        switch member("crossOrigin") {
        case nil: crossOrigin = false
        case .bool(let b)?: crossOrigin = b
        case let other?:
            throw CTAP2Error(.wrongType, "client data JSON: \"crossOrigin\" must be a boolean, found \(other.kindName)")
        }
        topOrigin = try string("topOrigin", required: false)
    }

    /// The JSON serialization (WebAuthn L3 §5.8.1.1), UTF-8.
    public var json: [UInt8] {
        var out: [UInt8] = Array("{\"type\":".utf8)
        Self.appendCCDString(type.rawValue, to: &out)
        out += Array(",\"challenge\":".utf8)
        Self.appendCCDString(Base64URL.encode(challenge), to: &out)
        out += Array(",\"origin\":".utf8)
        Self.appendCCDString(origin, to: &out)
        out += Array(",\"crossOrigin\":".utf8)
        out += Array((crossOrigin ? "true" : "false").utf8)
        if let topOrigin {
            out += Array(",\"topOrigin\":".utf8)
            Self.appendCCDString(topOrigin, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// SHA-256 of ``json``: the `clientDataHash` sent to the authenticator.
    public var hash: [UInt8] { Self.hash(ofJSON: json) }

    /// SHA-256 of client data JSON exactly as received (what a relying party must hash).
    public static func hash(ofJSON json: some Collection<UInt8>) -> [UInt8] {
        Array(SHA256.hash(data: Array(json)))
    }

    /// `CCDToString` (WebAuthn L3 §5.8.1.2): a JSON string where only `"`, `\` and code points below
    /// U+0020 are escaped, the latter as `\u` and four lower-case hex digits.
    static func appendCCDString(_ string: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Byte by byte: every byte that needs escaping is ASCII, and no byte of a multi-byte UTF-8
        // sequence is below 0x80, so the other bytes are copied as they are (the code points' UTF-8).
        for byte in string.utf8 {
            switch byte {
            case 0x22, 0x5C:
                out.append(UInt8(ascii: "\\"))
                out.append(byte)
            case 0..<0x20:
                out += Array("\\u00".utf8)
                out += Array(Hex.encode([byte]).utf8)
            default:
                out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
