#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
@testable import HybridRuntime
import NIOCore
import NIOEmbedded
import Synchronization
import Testing

/// A listener whose `accept` fails for want of descriptors says so once an episode, and again when
/// accepting works, instead of spinning silently (`AcceptFailures`, `AcceptFailureHandler`); a
/// failed bind advises the flag that moves the port only when another port would help.
@Suite("Accept failures: one line an episode; bind advice")
struct AcceptFailuresTests {
    /// The lines written, in order.
    final class Lines: Sendable {
        private let lines = Mutex<[AcceptFailures.Line]>([])
        var all: [AcceptFailures.Line] { lines.withLock { $0 } }
        func append(_ line: AcceptFailures.Line) { lines.withLock { $0.append(line) } }
    }

    @Test("an episode: one warning at its first failure (with the limit), one line at the next accept counting its failures")
    func oneEpisode() {
        let lines = Lines()
        let failures = AcceptFailures(lines.append)
        let start = NIODeadline.now()
        failures.accepted(now: start)  // no episode: nothing
        for step in 0..<1000 { failures.failed(errno: EMFILE, now: start + .milliseconds(Int64(step))) }
        failures.accepted(now: start + .milliseconds(2500))
        failures.accepted(now: start + .seconds(3))  // over already
        #expect(lines.all.count == 2, "\(lines.all)")
        guard case .paused(let paused) = lines.all.first, case .resumed(let resumed) = lines.all.last else {
            Issue.record("\(lines.all)")
            return
        }
        #expect(paused.hasPrefix("accept paused: too many open files (limit "), "\(paused)")
        #expect(paused.hasSuffix("; new connections wait in the kernel's queue until some close: close connections or raise `ulimit -n`"), "\(paused)")
        #expect(resumed == "accepting again: 1000 accept(s) failed over 2.5 s (\(AcceptFailures.reason(errno: EMFILE)))")
    }

    @Test("a flood that starts an episode each time a connection closes: three lines at once, then one a minute, counting those not shown")
    func episodesAreMetered() {
        let lines = Lines()
        let failures = AcceptFailures(lines.append)
        let start = NIODeadline.now()
        for episode in 0..<10 {
            let at = start + .milliseconds(Int64(10 * episode))
            failures.failed(errno: ENFILE, now: at)
            failures.accepted(now: at + .milliseconds(1))
        }
        #expect(lines.all.count == 6, "three episodes, each a start and an end: \(lines.all)")
        failures.failed(errno: ENFILE, now: start + .seconds(61))
        guard case .paused(let line) = lines.all.last else {
            Issue.record("\(lines.all)")
            return
        }
        #expect(
            line == "accept paused: the system's open-file table is full; new connections wait in the kernel's queue until some close "
                + "(7 earlier episode(s) not shown: at most one line a minute)")
    }

    @Test("on a listener: a failed accept is reported and stops there; an accepted channel ends the episode and goes on")
    func handlerOnAListener() throws {
        let lines = Lines()
        let failures = AcceptFailures(lines.append)
        let listener = EmbeddedChannel()
        try AcceptFailureHandler.install(on: listener, failures: failures)
        #expect(throws: Never.self) { try listener.throwIfErrorCaught() }
        listener.pipeline.fireErrorCaught(IOError(errnoCode: EMFILE, reason: "accept"))
        #expect(throws: Never.self) { try listener.throwIfErrorCaught() }
        #expect(lines.all.count == 1)
        let accepted = EmbeddedChannel()
        try listener.writeInbound(accepted as any Channel)
        #expect(try listener.readInbound(as: (any Channel).self) != nil, "the accepted channel goes on to the accept handler")
        #expect(lines.all.count == 2)
        if case .resumed(let line) = lines.all.last {
            #expect(line.hasPrefix("accepting again: 1 accept(s) failed over "), "\(line)")
        } else {
            Issue.record("\(lines.all)")
        }
        // Another error is no accept failure: it goes on.
        listener.pipeline.fireErrorCaught(ChannelError.ioOnClosedChannel)
        #expect(throws: ChannelError.self) { try listener.throwIfErrorCaught() }
        _ = try? accepted.finish()
        _ = try? listener.finish()
    }

    @Test("a failed bind names the flag for another port, unless the port was 0 or the process is out of descriptors")
    func portAdvice() {
        #expect(BindConflict.portAdvice(errno: EADDRINUSE, port: 47001, flag: "--port") == "; give another --port, or 0 for a free one")
        #expect(BindConflict.portAdvice(errno: EACCES, port: 80, flag: "--web-port") == "; give another --web-port, or 0 for a free one")
        #expect(BindConflict.portAdvice(errno: EADDRINUSE, port: 0, flag: "--port") == "")
        #expect(BindConflict.portAdvice(errno: EMFILE, port: 47001, flag: "--relay-port") == "")
        let reason = BindConflict.reason(errno: EMFILE, host: "127.0.0.1", port: 0)
        #expect(reason.hasPrefix("too many open files (limit ") && reason.hasSuffix("): raise `ulimit -n`"), "\(reason)")
    }
}
