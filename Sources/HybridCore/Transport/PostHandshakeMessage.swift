import CTAP2

/// The first transport message, phone → desktop, sequence 0 (protocol revision 1): a bare CBOR map
/// with no type byte.
///
/// | key | meaning |
/// | --- | --- |
/// | 1 | the authenticator's `authenticatorGetInfo` response CBOR, as a byte string |
/// | 2 | linking information (older phones; current ones use an update message) |
/// | 3 | supported features, e.g. `["ctap"]`; absent means `["ctap"]` (iOS 16) |
public struct PostHandshakeMessage: Sendable, Hashable {
    /// Key 1: the getInfo response CBOR.
    public var getInfo: [UInt8]?
    /// Key 2: a linking map, if the phone sent one here.
    public var linking: CBORValue?
    /// Key 3: supported features; `nil` when the key was absent.
    public var features: [String]?

    /// Creates a message.
    public init(getInfo: [UInt8]?, linking: CBORValue? = nil, features: [String]? = ["ctap"]) {
        self.getInfo = getInfo
        self.linking = linking
        self.features = features
    }

    /// The features in effect: key 3, or `["ctap"]` when it was absent.
    public var effectiveFeatures: [String] { features ?? ["ctap"] }

    /// The plaintext to encrypt.
    public func encode() -> [UInt8] {
        var map: [CBORValue: CBORValue] = [:]
        if let getInfo { map[1] = .bytes(getInfo) }
        if let linking { map[2] = linking }
        if let features { map[3] = .array(features.sorted().map { .text($0) }) }
        return CBOR.encode(.map(map))
    }

    /// Parses a decrypted post-handshake message with the Chromium desktop's rules
    /// (`FidoTunnelDevice` state `kWaitingForPostHandshakeMessage`), for a client that needs CTAP:
    /// key 3 if present must be an array (non-string entries ignored); CTAP must be advertised;
    /// key 1 must then be a byte string holding an `authenticatorGetInfo` response the desktop can
    /// use (``checkGetInfo(_:)``); key 2 if present must be a map.
    public static func parse(_ plaintext: [UInt8]) throws(HybridError) -> PostHandshakeMessage {
        let value: CBORValue
        do {
            value = try CBOR.decode(plaintext)
        } catch {
            throw HybridError(.invalidPostHandshakeMessage, notCBOR(plaintext, error))
        }
        guard let map = value.mapValue else {
            throw HybridError(.invalidPostHandshakeMessage, "not a CBOR map")
        }
        var features: [String]? = nil
        if let entry = map[3] {
            guard let array = entry.arrayValue else {
                throw HybridError(.invalidPostHandshakeMessage, "key 3 (features) is not an array")
            }
            features = array.compactMap(\.textValue)
        }
        let supportsCTAP = (features ?? ["ctap"]).contains("ctap")
        guard supportsCTAP else {
            throw HybridError(.invalidPostHandshakeMessage, "the authenticator does not offer CTAP")
        }
        guard let getInfo = map[1]?.bytesValue else {
            throw HybridError(.invalidPostHandshakeMessage, "key 1 (getInfo) missing or not a byte string")
        }
        try checkGetInfo(getInfo)
        if let linking = map[2], linking.mapValue == nil {
            throw HybridError(.invalidPostHandshakeMessage, "key 2 (linking) is not a map")
        }
        return PostHandshakeMessage(getInfo: getInfo, linking: map[2], features: features)
    }

    /// Why a plaintext that is not one CBOR item is not, in the terms of the usual mistakes: a type
    /// byte in front of the map (only later messages have one), bytes after the map (a padding
    /// count too small leaves them; a revision-0 phone pads this map itself), or a map cut short
    /// (a padding count too large would do that).
    private static func notCBOR(_ plaintext: [UInt8], _ error: CBORError) -> String {
        if let first = plaintext.first, (0x01...0x03).contains(first),
            (try? CBOR.decode(plaintext.dropFirst()))?.mapValue != nil
        {
            return "a type byte (0x0\(first)) comes before its CBOR map: the post-handshake message alone has none"
        }
        if let (value, length) = try? CBOR.decodePrefix(plaintext), value.mapValue != nil, length < plaintext.count {
            return "its CBOR map is followed by \(plaintext.count - length) more byte(s): a padding count too small by "
                + "that much leaves them (or a revision-0 phone, which pads this map itself: not supported)"
        }
        if error.code == .truncated, let first = plaintext.first, CBOR.isDefiniteMapHeader(first) {
            return "its CBOR map is cut short (\(error)): a padding count too large would do this"
        }
        return "not a CBOR item (\(error))"
    }

    /// Checks the getInfo response of key 1 as Chromium's desktop reads it once the tunnel is up
    /// (`ReadCTAPGetInfoResponse`, when it asks the device for its info and is answered from this
    /// cached value): canonical CBOR; a map with `versions` (text, none repeated) and a 16-byte
    /// `aaguid`; the members it reads of their types (`AuthenticatorGetInfoResponse` read the
    /// Chromium way, which skips what Chromium skips); `pinUvAuthProtocols` when `clientPin` or `pinUvAuthToken` is
    /// offered; `largeBlobs` only with `rk`; the `credBlob` extension only with `credProtect` and
    /// with 0x0F (`maxCredBlobLength`, at least 32), and 0x0F only with it; large blobs one way,
    /// not both the `largeBlob` extension and `largeBlobs` with `largeBlobKey`; 0x0B and 0x0D
    /// unsigned, 0x0C a boolean. It must name a CTAP2 version Chromium knows
    /// (``ctap2Versions``): Chromium would otherwise fall back to U2F, which hybrid does not carry.
    public static func checkGetInfo(_ getInfo: [UInt8]) throws(HybridError) {
        let info: AuthenticatorGetInfoResponse
        let members: [CBORValue: CBORValue]
        do {
            let decoded = try CBOR.decode(getInfo)
            info = try AuthenticatorGetInfoResponse(cbor: decoded, reading: .chromium)
            guard case .map(let map) = decoded else { preconditionFailure("a getInfo response decodes from a map") }
            members = map
        } catch {
            throw HybridError(.invalidPostHandshakeMessage, "key 1 (getInfo) is not an authenticatorGetInfo response: \(error)")
        }
        var seen = Set<String>()
        if let repeated = info.versions.first(where: { !seen.insert($0).inserted }) {
            throw HybridError(.invalidPostHandshakeMessage, "key 1 (getInfo): version \"\(repeated)\" is listed twice")
        }
        guard info.versions.contains(where: ctap2Versions.contains) else {
            let listed = info.versions.prefix(8).map { "\"\($0)\"" }.joined(separator: ", ")
            throw HybridError(
                .invalidPostHandshakeMessage,
                "key 1 (getInfo): versions [\(listed)\(info.versions.count > 8 ? ", …" : "")] name no CTAP2 version Chromium knows "
                    + "(\(ctap2Versions.sorted().joined(separator: ", "))), and hybrid carries CTAP2")
        }
        let options = info.options ?? [:]
        if options["clientPin"] != nil || options["pinUvAuthToken"] == true, info.pinUvAuthProtocols == nil {
            throw HybridError(
                .invalidPostHandshakeMessage, "key 1 (getInfo): clientPin or pinUvAuthToken is offered without 0x06 (pinUvAuthProtocols)")
        }
        if options["largeBlobs"] != nil, options["rk"] != true {
            throw HybridError(.invalidPostHandshakeMessage, "key 1 (getInfo): largeBlobs is offered without rk")
        }
        try checkExtensionRules(info, members: members, options: options)
    }

    /// Chromium's rules about the extensions it knows and the members it reads beyond the modelled
    /// ones (`ReadCTAPGetInfoResponse`).
    private static func checkExtensionRules(
        _ info: AuthenticatorGetInfoResponse, members: [CBORValue: CBORValue], options: [String: Bool]
    ) throws(HybridError) {
        func refuse(_ problem: String) -> HybridError { HybridError(.invalidPostHandshakeMessage, "key 1 (getInfo): \(problem)") }
        let extensions = Set(info.extensions ?? [])
        let credBlob = extensions.contains("credBlob")
        if credBlob, !extensions.contains("credProtect") {
            throw refuse("the credBlob extension is offered without credProtect")
        }
        switch members[0x0F] {
        case nil where credBlob:
            throw refuse("the credBlob extension is offered without 0x0F (maxCredBlobLength)")
        case let length? where !credBlob:
            throw refuse("0x0F (maxCredBlobLength) is \(length) without the credBlob extension")
        case .unsigned(let length)? where length < 32:
            throw refuse("0x0F (maxCredBlobLength) is \(length); CTAP 2.1 asks for at least 32")
        case let length? where !length.isUnsigned:
            throw refuse("0x0F (maxCredBlobLength): expected an unsigned integer, found \(length)")
        default:
            break
        }
        if options["largeBlobs"] == true, extensions.contains("largeBlobKey"), extensions.contains("largeBlob") {
            throw refuse("large blobs are offered both ways: the largeBlob extension, and largeBlobs with largeBlobKey")
        }
        for (key, name, wantsBool) in [(0x0B, "maxSerializedLargeBlobArray", false), (0x0C, "forcePINChange", true), (0x0D, "minPINLength", false)] {
            guard let value = members[.unsigned(UInt64(key))] else { continue }
            if wantsBool ? !value.isBool : !value.isUnsigned {
                throw refuse("0x0\(String(key, radix: 16, uppercase: true)) (\(name)): expected \(wantsBool ? "a boolean" : "an unsigned integer"), found \(value)")
            }
        }
    }

    /// The CTAP2 versions Chromium's desktop knows in a getInfo (`ConvertStringToCtap2Version`;
    /// CTAP 2.2 defines no version string of its own: its authenticators report `FIDO_2_1`).
    public static let ctap2Versions: Set<String> = ["FIDO_2_0", "FIDO_2_1"]
}

extension CBORValue {
    fileprivate var isUnsigned: Bool {
        if case .unsigned = self { return true }
        return false
    }

    fileprivate var isBool: Bool {
        if case .bool = self { return true }
        return false
    }
}
