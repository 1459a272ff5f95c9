/// The 16-byte advert plaintext (one AES block) of the QR flow:
/// reserved byte 0 ‖ 10-byte connection nonce ‖ 3-byte routing ID ‖ tunnel domain ID (uint16 little-endian).
/// Mirrors Chromium `eid::FromComponents` / `eid::ToComponents`.
public struct EID: Sendable, Hashable {
    /// Random connection nonce (10 bytes).
    public var nonce: [UInt8]
    /// Routing ID the tunnel service assigned on `/cable/new` (3 bytes).
    public var routingID: [UInt8]
    /// Tunnel-server domain the phone connected to.
    public var domain: TunnelDomainID

    /// Creates an EID. Traps if a size is wrong: the caller controls these values.
    public init(nonce: [UInt8], routingID: [UInt8], domain: TunnelDomainID) {
        precondition(nonce.count == HybridConstants.nonceSize, "EID nonce must be 10 bytes")
        precondition(routingID.count == HybridConstants.routingIDSize, "routing ID must be 3 bytes")
        self.nonce = nonce
        self.routingID = routingID
        self.domain = domain
    }

    /// The 16 plaintext bytes.
    public var bytes: [UInt8] {
        [0] + nonce + routingID + [UInt8(domain.rawValue & 0xFF), UInt8(domain.rawValue >> 8)]
    }

    /// Parses plaintext bytes with the desktop's rules: 16 bytes, reserved byte zero,
    /// and a known domain ID (Chromium `eid::ToComponents` + `tunnelserver::DecodeDomain`).
    public init(bytes: [UInt8]) throws(HybridError) {
        guard bytes.count == HybridConstants.eidSize else {
            throw HybridError(.invalidAdvert, "EID is \(bytes.count) bytes, expected 16")
        }
        guard bytes[0] == 0 else { throw HybridError(.invalidAdvert, "reserved byte of the EID is not zero") }
        let domain = TunnelDomainID(rawValue: UInt16(bytes[14]) | UInt16(bytes[15]) << 8)
        guard domain.host != nil else {
            throw HybridError(.invalidAdvert, "EID names tunnel domain \(domain.rawValue), which is assigned but unknown")
        }
        self.nonce = Array(bytes[1..<11])
        self.routingID = Array(bytes[11..<14])
        self.domain = domain
    }
}
