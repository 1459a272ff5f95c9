import Crypto

/// A tunnel-server domain ID as carried in the advert (Chromium `tunnelserver::KnownDomainID`).
///
/// IDs below 256 index the assigned domains (`cable.ua5v.com` = 0, `cable.auth.com` = 1; 2…255 are
/// unknown and invalid). IDs from 256 name a domain derived from a hash of the ID
/// (`tunnelserver::DecodeDomain`).
public struct TunnelDomainID: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The 16-bit ID.
    public let rawValue: UInt16

    /// Wraps an ID.
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// Google's tunnel service, `cable.ua5v.com` (used by Chromium phones).
    public static let google = TunnelDomainID(rawValue: 0)
    /// Apple's tunnel service, `cable.auth.com`.
    public static let apple = TunnelDomainID(rawValue: 1)

    private static let assigned = ["cable.ua5v.com", "cable.auth.com"]

    /// The host name, or `nil` for an assigned-but-unknown ID (2…255).
    public var host: String? {
        if rawValue < 256 {
            return Int(rawValue) < Self.assigned.count ? Self.assigned[Int(rawValue)] : nil
        }
        let input = Array("caBLEv2 tunnel server domain".utf8)
            + [UInt8(rawValue & 0xFF), UInt8(rawValue >> 8), 0]
        let digest = Array(SHA256.hash(data: input))
        var v: UInt64 = 0
        for i in 0..<8 { v |= UInt64(digest[i]) << UInt64(8 * i) }
        let tlds = ["com", "org", "net", "info"]
        let tld = tlds[Int(v & 3)]
        v >>= 2
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567")
        var name = "cable."
        while v != 0 {
            name.append(alphabet[Int(v & 31)])
            v >>= 5
        }
        return name + "." + tld
    }

    public var description: String { host.map { "\(rawValue) (\($0))" } ?? "\(rawValue) (unknown)" }
}
