import CTAP2
import HybridCore
import HybridInspect
import Testing

/// What the inspector says of recordings a relay's faults (`relay --fault`) or a misbehaving peer
/// produce, in recordings made by hand (``HandMadeSession``).
@Suite("Inspect: faults and misbehaviour in hand-made recordings")
struct InspectorFaultTests {
    @Test("a cut message (relay --fault truncate=10@to-phone#2) is a shape anomaly, not keys that don't match")
    func truncatedMessageIsNotAKeyMismatch() throws {
        var session = try HandMadeSession.signIn()
        let request = session.transportIndexes[2]
        session.change(request) { Array($0.prefix(10)) }
        session.entries.removeSubrange((request + 1)..<(session.entries.count - 1))  // the phone gave up; the close stays
        let inspection = Inspector.inspect(session.recording, keyLog: [session.keys])
        #expect(inspection.keys == .matched, "\(inspection.keyDetail)")
        #expect(inspection.keyDetail.hasPrefix("key log entry 1 of 1 is this session's"), "\(inspection.keyDetail)")
        let cut = try #require(inspection.messages.last)
        #expect(cut.title == "malformed transport message")
        #expect(cut.anomalies.first == "10 bytes is not whole 32-byte padded blocks plus a 16-byte tag", "\(cut.anomalies)")
        #expect(inspection.messages.filter { $0.from == "phone" && $0.sequence != nil }.allSatisfy { $0.plaintextBytes != nil })
        // A cut that keeps the tag's length (40 bytes) is judged the same way.
        var longer = try HandMadeSession.signIn()
        longer.change(longer.transportIndexes[2]) { Array($0.prefix(40)) }
        #expect(Inspector.inspect(longer.recording, keyLog: [longer.keys]).keys == .matched)
    }
}
