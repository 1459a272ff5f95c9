import HybridSim
import Testing

/// The time at the start of a listening phone's lines (and the relay's log lines).
@Suite("LogTime")
struct LogTimeTests {
    @Test("a stamp has the relay log's shape, and strip takes exactly it and its space off")
    func stampAndStrip() {
        let stamp = LogTime.stamp(1_795_000_000)
        #expect(stamp.utf8.count == 24 && stamp.contains("T"), "\(stamp)")
        #expect(LogTime.strip(stamp + " push channel open on ws://x") == "push channel open on ws://x")
        #expect(LogTime.strip("2026-11-27T16:56:31-0500 a line") == "a line")
        // Anything else stays as it is.
        for line in ["push channel open", "2026-11-27T16:56:31+0000", "2026-11-27T16:56:31+0000x", "2026-11-27 16:56:31+0000 a",
                     "error: 2026-11-27T16:56:31+0000 a", "2026-1a-27T16:56:31+0000 a", ""] {
            #expect(LogTime.strip(line) == line, "\(line)")
        }
    }
}
