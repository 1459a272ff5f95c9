import CTAP2
import Crypto

/// The contents of the `FIDO:/` QR code a client (desktop) shows: a CBOR map of keys 0–5,
/// encoded with ``Digits``. Parse rules follow Chromium `qr::Parse`.
///
/// | key | meaning |
/// | --- | --- |
/// | 0 | the client's P-256 identity public key, compressed (33 bytes), required |
/// | 1 | the 16-byte QR secret, required |
/// | 2 | number of assigned tunnel-server domains the client knows, optional (default 0) |
/// | 3 | current time in seconds since the Unix epoch, optional, never interpreted |
/// | 4 | whether the client can store linking information, optional |
/// | 5 | request-type hint `"ga"` / `"mc"`; unknown values mean `"ga"` |
///
/// Key 6 is never emitted (implementations disagree on its type) and is ignored when parsing,
/// as are all other unknown keys.
public struct QRPayload: Sendable, Hashable {
    /// The hint of what the client will ask for once connected.
    public enum RequestType: String, Sendable, Hashable, CaseIterable {
        /// `"ga"`: a getAssertion (sign-in) follows.
        case getAssertion = "ga"
        /// `"mc"`: a makeCredential (registration) follows.
        case makeCredential = "mc"
    }

    /// Key 0: the client's identity public key, X9.62 compressed (33 bytes).
    public var compressedPublicKey: [UInt8] {
        didSet { parsedKey = ParsedKey() }
    }
    /// Key 1: the QR secret (16 bytes).
    public var secret: [UInt8]
    /// Key 2: number of assigned tunnel-server domains the client knows.
    public var knownDomainCount: UInt64
    /// Key 3: seconds since the Unix epoch when the code was made, if present.
    public var timestamp: UInt64?
    /// Key 4: whether the client supports linking, if present.
    public var supportsLinking: Bool?
    /// Key 5: the request-type hint.
    public var requestType: RequestType
    /// Key 0 as the point parsing decompressed to validate it, so that ``publicKey`` does not
    /// decompress it a second time (a square root modulo p: about 20 µs).
    private var parsedKey = ParsedKey()

    /// Creates a payload. Sizes are checked when encoding is parsed back, not here.
    public init(
        compressedPublicKey: [UInt8],
        secret: [UInt8],
        knownDomainCount: UInt64 = UInt64(HybridConstants.assignedDomainCount),
        timestamp: UInt64? = nil,
        supportsLinking: Bool? = nil,
        requestType: RequestType = .getAssertion
    ) {
        self.compressedPublicKey = compressedPublicKey
        self.secret = secret
        self.knownDomainCount = knownDomainCount
        self.timestamp = timestamp
        self.supportsLinking = supportsLinking
        self.requestType = requestType
    }

    /// The CBOR map, keys 0–5 (optional ones only when set).
    public var cbor: CBORValue {
        var map: [CBORValue: CBORValue] = [
            0: .bytes(compressedPublicKey),
            1: .bytes(secret),
            2: .unsigned(knownDomainCount),
        ]
        if let timestamp { map[3] = .unsigned(timestamp) }
        if let supportsLinking { map[4] = .bool(supportsLinking) }
        map[5] = .text(requestType.rawValue)
        return .map(map)
    }

    /// The `FIDO:/` URL to put in the QR code.
    public var url: String {
        HybridConstants.qrPrefix + Digits.encode(CBOR.encode(cbor))
    }

    /// The identity public key, decompressed (once: a payload parsed from a QR code keeps the
    /// point its validation computed).
    public var publicKey: P256.KeyAgreement.PublicKey {
        get throws(HybridError) {
            if let key = parsedKey.key { return key }
            return try Self.decompress(compressedPublicKey)
        }
    }

    /// Parses a `FIDO:/` URL. The prefix is compared case-insensitively.
    /// Throws ``HybridError/Code/invalidQRCode`` or ``HybridError/Code/invalidDigits`` naming the rule.
    public init(url: String) throws(HybridError) {
        // ASCII case-insensitive, like Chromium: Unicode case mapping would also match "fıdo:/".
        let prefix = Array(HybridConstants.qrPrefix.utf8)
        let head = url.utf8.prefix(prefix.count).map { $0 >= 0x61 && $0 <= 0x7A ? $0 - 0x20 : $0 }
        guard url.utf8.count > prefix.count, head == prefix else {
            throw HybridError(.invalidQRCode, "not a FIDO:/ URL with a payload")
        }
        let bytes = try Digits.decode(String(decoding: url.utf8.dropFirst(prefix.count), as: UTF8.self))
        let value: CBORValue
        do {
            value = try CBOR.decode(bytes)
        } catch {
            // Every payload a desktop writes is a map: another first byte means the digits were
            // turned into bytes another way (big-endian groups are the usual mistake).
            let notAMap = bytes.first.map { !(0xA0...0xBF).contains($0) } ?? false
            let hint = notAMap
                ? "; the decoded bytes do not start with a CBOR map: is each 17-digit group a 7-byte little-endian number?" : ""
            throw HybridError(.invalidQRCode, "payload is not canonical CBOR (\(error))\(hint)")
        }
        try self.init(cbor: value)
    }

    /// Applies Chromium's `qr::Parse` rules to a decoded CBOR value.
    public init(cbor value: CBORValue) throws(HybridError) {
        guard let map = value.mapValue else { throw HybridError(.invalidQRCode, "payload is not a CBOR map") }
        guard let key = map[0]?.bytesValue else {
            let textKeys = !map.isEmpty && map.keys.allSatisfy { $0.textValue != nil }
            throw HybridError(
                .invalidQRCode,
                "key 0 (public key) missing or not a byte string" + (textKeys ? " (the map's keys are text strings; the QR code's keys are integers 0-5)" : ""))
        }
        guard key.count == HybridConstants.compressedPublicKeySize else {
            throw HybridError(.invalidQRCode, "key 0 (public key) is \(key.count) bytes, expected 33")
        }
        let point: P256.KeyAgreement.PublicKey
        do {
            point = try Self.decompress(key)
        } catch {
            throw HybridError(.invalidQRCode, "key 0 (public key) is not a valid compressed P-256 point")
        }
        guard let secret = map[1]?.bytesValue, secret.count == HybridConstants.qrSecretSize else {
            throw HybridError(.invalidQRCode, "key 1 (secret) missing or not a 16-byte byte string")
        }
        var domains: UInt64 = 0
        if let entry = map[2] {
            guard let n = entry.unsignedValue else { throw HybridError(.invalidQRCode, "key 2 (known domains) is not an unsigned integer") }
            domains = n
        }
        var linking: Bool? = nil
        if let entry = map[4] {
            guard let b = entry.boolValue else { throw HybridError(.invalidQRCode, "key 4 (supports linking) is not a boolean") }
            linking = b
        }
        var type = RequestType.getAssertion
        if let entry = map[5] {
            guard let s = entry.textValue else { throw HybridError(.invalidQRCode, "key 5 (request type) is not a text string") }
            type = RequestType(rawValue: s) ?? .getAssertion  // unknown hints are treated as "ga"
        }
        self.init(
            compressedPublicKey: key, secret: secret, knownDomainCount: domains,
            timestamp: map[3]?.unsignedValue, supportsLinking: linking, requestType: type)
        parsedKey = ParsedKey(key: point)
    }

    /// A cache, not part of the value: every two compare equal and it adds nothing to a hash, so
    /// a parsed payload equals the same payload built by hand.
    private struct ParsedKey: Sendable, Hashable {
        var key: P256.KeyAgreement.PublicKey?

        static func == (_: ParsedKey, _: ParsedKey) -> Bool { true }
        func hash(into hasher: inout Hasher) {}
    }

    static func decompress(_ bytes: [UInt8]) throws(HybridError) -> P256.KeyAgreement.PublicKey {
        do {
            return try P256.KeyAgreement.PublicKey(compressedRepresentation: bytes)
        } catch {
            throw HybridError(.invalidPublicKey, "not a compressed P-256 point")
        }
    }
}
