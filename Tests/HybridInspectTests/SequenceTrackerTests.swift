@testable import HybridInspect
import Testing

/// The sequence numbers the inspector tries for a message (``SequenceTracker``), at the edges: a
/// long run of messages that do not authenticate, and the last number a nonce can hold.
@Suite("Inspect: the sequence numbers tried")
struct SequenceTrackerTests {
    @Test("after many messages in a row that do not authenticate, each further one is tried at a few numbers only")
    func fewCandidatesAfterManyFailures() {
        var tracker = SequenceTracker()
        _ = tracker.authenticated(0, message: 0)
        for _ in 0..<3 { tracker.failed() }
        // A few failures: the whole window (gap ahead, replay or reorder behind).
        #expect(tracker.candidates(search: 8).count > 8)
        for _ in 3..<100 { tracker.failed() }
        let few = tracker.candidates(search: 8)
        // A recording of junk costs at most 4 attempts a message in each direction's key (it was 10 in all before).
        #expect(few.count <= 4, "\(few)")
        #expect(few.first == 101, "the number after the ones that failed, first")
        #expect(few.contains(1), "none of them used a number (not of this stream)")
    }

    @Test("a message at sequence 2^32 − 1 authenticates without a trap, and a second one is a replay")
    func lastSequenceNumber() {
        var tracker = SequenceTracker(next: .max)
        #expect(tracker.candidates(search: 8).first == .max)
        #expect(tracker.authenticated(.max, message: 0) == nil)
        #expect(!tracker.candidates(search: 8).isEmpty)
        let repeated = tracker.authenticated(.max, message: 1)
        #expect(repeated?.kind == .sequenceRepeated && repeated?.text == "sequence 4294967295 repeated (a replayed message)")
        let reordered = tracker.authenticated(.max - 1, message: 2)
        #expect(reordered?.kind == .reordered
            && reordered?.text == "reordered (sent as sequence 4294967294, recorded after sequence 4294967295)")
    }
}
