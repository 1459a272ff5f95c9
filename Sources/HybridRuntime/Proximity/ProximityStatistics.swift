/// What a ``ProximityScanner`` has seen, by category. Every datagram lands in exactly one of
/// `matched`, `wrongLength`, `unknownServiceUUID`, `tooFar`, `replayed`, `notOurs`, `invalid`.
public struct ProximityStatistics: Sendable, Hashable, CustomStringConvertible {
    /// The scanner's threshold, to explain `tooFar`.
    public var minRSSI: Int8
    /// Datagrams received.
    public var received = 0
    /// Adverts the matcher accepted (each distinct advert once).
    public var matched = 0
    /// Datagrams that were not 23 bytes long.
    public var wrongLength = 0
    /// Datagrams with a service UUID other than 0xFFF9 / 0xFDE2.
    public var unknownServiceUUID = 0
    /// The first of those UUIDs, as read (big-endian), e.g. 0xF9FF from a sender that wrote 0xFFF9
    /// little-endian.
    public var firstUnknownServiceUUID: UInt16?
    /// Adverts with an RSSI below ``minRSSI``.
    public var tooFar = 0
    /// The strongest RSSI among the `tooFar` adverts (the one that came closest to passing).
    public var strongestTooFarRSSI: Int8?
    /// Repeats of an advert that already matched (the phone keeps advertising; a replay looks the same).
    public var replayed = 0
    /// Adverts the matcher did not recognise: another session's, or noise (their tag does not
    /// authenticate under this session's key).
    public var notOurs = 0
    /// Adverts that authenticate under this session's key but that the matcher found unusable
    /// (``ProximityScanner/Verdict/invalid(reason:)``: a reserved byte that is not zero, an
    /// unknown tunnel domain). Ignored, as Chromium ignores them.
    public var invalid = 0
    /// Why the first `invalid` advert was unusable.
    public var invalidReason: String?

    /// Creates empty counters for a scanner with threshold `minRSSI`.
    public init(minRSSI: Int8) {
        self.minRSSI = minRSSI
    }

    /// Datagrams that did not produce a match.
    public var ignored: Int { wrongLength + unknownServiceUUID + tooFar + replayed + notOurs + invalid }

    /// " (first: 0xF9FF, FIDO's 0xFFF9 byte-swapped: it is big-endian)", or " (first: 0x1234)";
    /// empty when none was seen.
    public var unknownServiceUUIDDetail: String {
        guard let uuid = firstUnknownServiceUUID else { return "" }
        if let known = ProximityServiceUUID(rawValue: uuid.byteSwapped) {
            let name = known == .fido ? "FIDO's" : "Google's"
            return " (first: \(ProximityDatagram.text(uuid: uuid)), \(name) \(ProximityDatagram.text(uuid: known.rawValue)) byte-swapped: it is big-endian)"
        }
        return " (first: \(ProximityDatagram.text(uuid: uuid)))"
    }

    /// E.g. "3 datagrams received, 0 matched, 3 ignored: 2 too far (best rssi -80 < -70), 1 not ours
    /// (other session or noise)".
    public var description: String {
        var parts: [String] = []
        if tooFar > 0 {
            let best = strongestTooFarRSSI.map { "best rssi \($0) < \(minRSSI)" } ?? "rssi < \(minRSSI)"
            parts.append("\(tooFar) too far (\(best))")
        }
        if invalid > 0 { parts.append("\(invalid) for this session but invalid (first: \(invalidReason ?? "unusable plaintext"))") }
        if notOurs > 0 { parts.append("\(notOurs) not ours (other session or noise)") }
        if replayed > 0 { parts.append("\(replayed) replayed (advert already used)") }
        if wrongLength > 0 { parts.append("\(wrongLength) wrong length (not 23 bytes)") }
        if unknownServiceUUID > 0 { parts.append("\(unknownServiceUUID) unknown service UUID\(unknownServiceUUIDDetail)") }
        let noun = received == 1 ? "datagram" : "datagrams"
        var text = "\(received) \(noun) received, \(matched) matched"
        if ignored > 0 { text += ", \(ignored) ignored: " + parts.joined(separator: ", ") }
        return text
    }
}
