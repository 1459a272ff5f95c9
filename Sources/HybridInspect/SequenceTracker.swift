/// One direction's transport sequence numbers as the inspector meets its messages (PROTOCOL §6: a
/// message's nonce is its sequence number in its direction): which numbers authenticated, how many
/// messages since the last one that did not, and the gaps flagged, so that a message that comes
/// later to fill a gap is called reordered and the gap is said again with what is still missing.
struct SequenceTracker {
    /// A message that authenticated past the next number in order.
    struct Gap {
        /// Its index in the inspection's messages.
        var message: Int
        /// The anomaly written on it (replaced by ``finalAnomalies()`` if the gap filled later).
        var anomaly: String
        /// The next number expected, and the message's own.
        var expected: UInt32
        var sequence: UInt32
        /// The numbers it skipped.
        var skipped: [UInt32]
    }

    /// One past the highest sequence number that authenticated: the next one in order (it stays
    /// at `UInt32.max` once that number authenticated: no number follows it).
    private(set) var next: UInt32 = 0
    /// The highest sequence number that authenticated, if any.
    private(set) var highest: UInt32?
    /// The sequence numbers that authenticated.
    private(set) var used: Set<UInt32> = []
    /// Messages that did not authenticate since the last one that did. One altered in transit used
    /// a sequence number; one that is not of this direction's stream (recorded in the wrong
    /// direction, made up) used none, so they are not counted as used until a later one says so.
    private(set) var failedSince = 0
    private(set) var gaps: [Gap] = []

    /// A direction whose next number in order is `next` (0: a stream's start; later: tests).
    init(next: UInt32 = 0) { self.next = next }

    /// The number a message that does not authenticate is shown with: the next in order after
    /// those that failed before it (each taken as altered, so as having used one).
    var guess: UInt32 { UInt32(clamping: UInt64(next) + UInt64(failedSince)) }

    /// Whether `search` or more messages in a row did not authenticate: then each further one is
    /// tried at ``candidates(search:few:)``'s few numbers only.
    func failingLong(search: UInt32) -> Bool { failedSince >= Int(search) }

    /// The numbers to try for a message, the next in order after the failed messages first (each
    /// taken as altered, so as having used one, however many they are). While fewer than `search`
    /// failed in a row (and `few` is false), then the numbers from ``next`` up to `search` beyond
    /// that first one (some failed ones used none, or a gap), then the `search` before ``next``
    /// (reordered if unused, replayed if used): at most `3 × search`. After that many (or with
    /// `few`), then only the two after it (a short gap) and ``next`` (none of them was of this
    /// stream): 4 numbers, so that a recording of junk costs few decryptions a message.
    func candidates(search: UInt32, few: Bool = false) -> [UInt32] {
        let (next, search) = (UInt64(next), UInt64(search))
        let first = next + UInt64(failedSince)
        let others: [UInt64]
        if few || failingLong(search: UInt32(search)) {
            others = [first + 1, first + 2, next]
        } else {
            let ahead = (next...(first + search)).filter { $0 != first }
            others = ahead + (next - min(next, search)..<next).reversed()
        }
        return ([first] + others).compactMap { UInt32(exactly: $0) }
    }

    /// A message did not authenticate at any candidate.
    mutating func failed() { failedSince += 1 }

    /// A message authenticated at `sequence`; `message` is its index in the inspection. Returns
    /// the anomaly it is, if any: a gap (numbers skipped that no failed message accounts for), a
    /// reordered message (an earlier number not used yet) or a replayed one (a number used already).
    mutating func authenticated(_ sequence: UInt32, message: Int) -> (kind: Inspection.AnomalyKind, text: String)? {
        defer { used.insert(sequence) }
        // Before the order check: at `UInt32.max`, ``next`` is a number that may have been used.
        if used.contains(sequence) { return (.sequenceRepeated, "sequence \(sequence) repeated (a replayed message)") }
        guard sequence >= next else {
            return (.reordered, "reordered (sent as sequence \(sequence), recorded after sequence \(highest ?? next - 1))")
        }
        // The messages that failed since the last success took the numbers right after it.
        let skipped = sequence - next
        let altered = min(skipped, UInt32(clamping: failedSince))
        let expected = next + altered
        highest = sequence
        next = sequence == .max ? .max : sequence + 1
        failedSince = 0
        guard sequence > expected else { return nil }
        let anomaly = "sequence gap: expected \(expected), this is \(sequence) (\(sequence - expected) message(s) missing)"
        gaps.append(Gap(message: message, anomaly: anomaly, expected: expected, sequence: sequence, skipped: Array(expected..<sequence)))
        return (.sequenceGap, anomaly)
    }

    /// The gaps that messages arriving later filled, all or in part: the message's index, the
    /// anomaly written on it, and what it is now (all filled: reordered; else still a gap).
    func finalAnomalies() -> [(message: Int, was: String, now: String, kind: Inspection.AnomalyKind)] {
        gaps.compactMap { gap in
            let missing = gap.skipped.filter { !used.contains($0) }
            guard missing.count < gap.skipped.count else { return nil }
            let arrived = gap.skipped.filter { used.contains($0) }
            let now =
                missing.isEmpty
                ? "sequence \(gap.sequence) arrived before sequence \(arrived.map(String.init).joined(separator: ", ")) "
                    + "(reordered in transit: \(arrived.count == 1 ? "it was" : "they were") recorded later)"
                : "sequence gap: expected \(gap.expected), this is \(gap.sequence) (\(missing.count) message(s) missing; "
                    + "\(arrived.count) more arrived later, reordered)"
            return (gap.message, gap.anomaly, now, missing.isEmpty ? .reordered : .sequenceGap)
        }
    }
}
