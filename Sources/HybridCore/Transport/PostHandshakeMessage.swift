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
    /// key 1 must then be a byte string; key 2 if present must be a map.
    public static func parse(_ plaintext: [UInt8]) throws(HybridError) -> PostHandshakeMessage {
        let value: CBORValue
        do {
            value = try CBOR.decode(plaintext)
        } catch {
            throw HybridError(.invalidPostHandshakeMessage, "not a CBOR item (\(error)); revision-0 phones are not supported")
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
        if let linking = map[2], linking.mapValue == nil {
            throw HybridError(.invalidPostHandshakeMessage, "key 2 (linking) is not a map")
        }
        return PostHandshakeMessage(getInfo: getInfo, linking: map[2], features: features)
    }
}
