import HybridSim
import NIOCore
import Synchronization
import Testing

/// The budget of refusal lines of the loopback servers: a page looping refused requests must not
/// bury the program's output.
@Suite("Refusal lines: a burst, then a few a second, and a count of those not shown")
struct RefusalLogTests {
    @Test("past the burst, lines are counted, not written; the next line written says how many; each is cut to the limit")
    func budget() async throws {
        let written = Mutex<[String]>([])
        let log = RefusalLog { line in written.withLock { $0.append(line) } }
        let burst = Int(RefusalLog.burst)
        // A clock of the test's own: however slow the run, no token comes back during the burst.
        let start = NIODeadline.now()
        for index in 0..<(burst + 30) { log.note("refused \(index)", now: start) }
        #expect(written.withLock { $0.count } == burst, "\(written.withLock { $0 })")
        // One token comes back in 1 / perSecond seconds.
        log.note("refused again", now: start + .milliseconds(Int64(1000 / RefusalLog.perSecond) + 100))
        let last = try #require(written.withLock { $0.last })
        #expect(last.hasPrefix("refused again (and 30 more refused request(s) not shown"), "\(last)")
        log.note(String(repeating: "x", count: 1000))
        // Either written (cut) or counted; never written whole.
        #expect(written.withLock { $0 }.allSatisfy { $0.count <= RefusalLog.lineLimit + 200 })
    }

    @Test("a listening phone's ignored pushes share the budget, counted under their own name")
    func ignoredPushes() {
        let written = Mutex<[String]>([])
        let log = RefusalLog(noun: "ignored push(es)") { line in written.withLock { $0.append(line) } }
        let start = NIODeadline.now()
        for index in 0..<3000 { log.note("ignored a push: malformed \(index)", now: start) }
        log.note("ignored a push: malformed again", now: start + .seconds(1))
        let lines = written.withLock { $0 }
        #expect(lines.count == Int(RefusalLog.burst) + 1, "3,000 pushes, \(lines.count) lines")
        #expect(lines.last?.hasSuffix("(and \(3000 - Int(RefusalLog.burst)) more ignored push(es) not shown: at most 2 lines a second)") == true, "\(lines.last ?? "")")
        // A flood with nothing after it: flush says how many at the end, once.
        for index in 0..<100 { log.note("ignored a push: malformed \(index)", now: start + .seconds(1)) }
        log.flush()
        log.flush()
        let after = written.withLock { $0 }
        // The second token of that second went to the first of the 100; 99 were counted.
        #expect(after.last == "99 more ignored push(es) not shown (at most 2 lines a second)", "\(after.last ?? "")")
        #expect(after.count == lines.count + 2, "\(after.suffix(3))")
    }
}
