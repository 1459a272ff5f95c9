/// One entry of `Vectors/qr.json` (FIDO:/ URLs: captured Chrome and Safari codes, Chromium `KnownQRs`,
/// invalid URLs). The one decoder of that file: the core's `QRPayloadTests` and the QR module's
/// `RealWorldTests` both read it through ``QRVector/load()``. Negative cases lack most fields.
public struct QRVector: Decodable, Sendable {
    /// A short unique name.
    public let name: String
    /// The `FIDO:/…` URL.
    public let url: String
    /// Hex of the CBOR map the digits decode to.
    public let cbor: String?
    /// Hex of the compressed P-256 key (key 0).
    public let publicKey: String?
    /// Hex of the same key uncompressed.
    public let publicKeyUncompressed: String?
    /// Hex of the QR secret (key 1).
    public let secret: String?
    /// Key 2: number of known tunnel-server domains.
    public let knownDomains: UInt64?
    /// Key 3: timestamp, if present.
    public let timestamp: UInt64?
    /// Key 4: whether the client supports linking, if present.
    public let supportsLinking: Bool?
    /// Key 5: `"ga"` or `"mc"`, if present.
    public let requestType: String?
    /// Set on codes captured from real browsers: whether our encoder reproduces the URL exactly.
    public let reencodesIdentically: Bool?
    /// For negative cases: the error the parser must report.
    public let expectError: String?

    /// Every entry of `Vectors/qr.json`.
    public static func load() throws -> [QRVector] {
        try Vectors.load("qr", as: VectorFile<QRVector>.self).vectors
    }
}
