import CTAP2

/// The 16-bit BLE service UUID a caBLE advert is carried under (PROTOCOL.md §3.1).
public enum ProximityServiceUUID: UInt16, Sendable, Hashable, CaseIterable {
    /// 0xFFF9, assigned to FIDO: what current phones use.
    case fido = 0xFFF9
    /// 0xFDE2, assigned to Google: older Chrome for Android and iOS 16.
    case google = 0xFDE2
}

/// Defaults of the proximity stub (Docs/RELAY.md "Proximity stub"; part of the external contract, Docs/CLI.md).
public enum ProximityDefaults {
    /// UDP port the desktop's scanner binds by default (`--proximity-port`).
    public static let scannerPort = 47002
    /// Weakest RSSI the scanner accepts (`--min-rssi`), in dBm.
    public static let minRSSI: Int8 = -70
    /// RSSI the phone claims (`--rssi`), in dBm.
    public static let rssi: Int8 = -45
    /// How often the phone repeats its advert.
    public static let advertInterval: Duration = .milliseconds(100)
    /// How long the phone advertises before giving up.
    public static let giveUpAfter: Duration = .seconds(120)
}

/// One simulated BLE advert as sent over UDP: exactly 23 bytes.
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 2 | service UUID, big-endian (0xFFF9 or 0xFDE2) |
/// | 2 | 1 | simulated RSSI, signed, dBm |
/// | 3 | 20 | the caBLE advert: AES-256(EID) ‖ HMAC-SHA256[0:4] |
public struct ProximityDatagram: Sendable, Hashable {
    /// Size of a datagram on the wire.
    public static let size = 23
    /// Size of the caBLE advert inside it.
    public static let advertSize = 20

    /// The service UUID the advert is carried under.
    public var serviceUUID: ProximityServiceUUID
    /// The simulated received signal strength, in dBm.
    public var rssi: Int8
    /// The 20-byte caBLE advert, byte-exact.
    public let advert: [UInt8]

    /// A datagram for `advert`; throws `.wrongAdvertLength` unless it has exactly 20 bytes.
    public init(serviceUUID: ProximityServiceUUID = .fido, rssi: Int8, advert: [UInt8]) throws {
        guard advert.count == Self.advertSize else {
            throw RuntimeError(.wrongAdvertLength, "a caBLE advert has \(Self.advertSize) bytes, not \(advert.count)")
        }
        self.serviceUUID = serviceUUID
        self.rssi = rssi
        self.advert = advert
    }

    /// Parses a received datagram.
    ///
    /// - Throws: `.wrongDatagramLength` unless exactly 23 bytes; `.unknownServiceUUID` for a UUID
    ///   other than 0xFFF9 / 0xFDE2.
    public init(parsing bytes: some Collection<UInt8>) throws {
        let bytes = Array(bytes)
        guard bytes.count == Self.size else {
            throw RuntimeError(
                .wrongDatagramLength,
                "a proximity datagram has \(Self.size) bytes, not \(bytes.count)"
            )
        }
        let raw = Self.serviceUUIDField(bytes)
        guard let uuid = ProximityServiceUUID(rawValue: raw) else {
            throw RuntimeError(.unknownServiceUUID, "unknown service UUID \(Self.text(uuid: raw))")
        }
        self.serviceUUID = uuid
        self.rssi = Int8(bitPattern: bytes[2])
        self.advert = Array(bytes[3...])
    }

    /// The service-UUID field of a datagram of ``size`` bytes (bytes 0–1, big-endian), known or not.
    static func serviceUUIDField(_ bytes: [UInt8]) -> UInt16 { UInt16(bytes[0]) << 8 | UInt16(bytes[1]) }

    /// A 16-bit UUID as the BLE specifications write it: `0xFFF9`.
    static func text(uuid: UInt16) -> String { "0x" + Hex.encode([UInt8(uuid >> 8), UInt8(uuid & 0xFF)], uppercase: true) }

    /// The 23 bytes on the wire.
    public var bytes: [UInt8] {
        let uuid = serviceUUID.rawValue
        return [UInt8(uuid >> 8), UInt8(uuid & 0xFF), UInt8(bitPattern: rssi)] + advert
    }
}

/// Where proximity datagrams go: `udp://HOST:PORT` on loopback.
public struct ProximityEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// Loopback host (`127.0.0.1`, `::1` or `localhost`).
    public var host: String
    /// UDP port.
    public var port: Int

    /// An endpoint; not validated until used.
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `udp://HOST:PORT` (IPv6 in brackets); throws `.invalidAddress`.
    public init(parsing url: String) throws {
        let invalid = { (why: String) in RuntimeError(.invalidAddress, "invalid proximity address \(url): \(why)") }
        guard url.hasPrefix("udp://") else { throw invalid("must look like udp://127.0.0.1:47002") }
        let authority = url.dropFirst("udp://".count)
        let hostPart: Substring
        let portPart: Substring
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            guard after.hasPrefix(":") else { throw invalid("missing port") }
            portPart = after.dropFirst()
        } else {
            guard let colon = authority.lastIndex(of: ":") else { throw invalid("missing port") }
            hostPart = authority[..<colon]
            portPart = authority[authority.index(after: colon)...]
        }
        guard !hostPart.isEmpty else { throw invalid("missing host") }
        guard let port = Int(portPart), (1...65535).contains(port) else { throw invalid("bad port") }
        self.host = String(hostPart)
        self.port = port
    }

    /// `udp://HOST:PORT`.
    public var description: String {
        host.contains(":") ? "udp://[\(host)]:\(port)" : "udp://\(host):\(port)"
    }
}
