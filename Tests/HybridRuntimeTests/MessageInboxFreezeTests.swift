import Foundation
@testable import HybridRuntime
import NIOCore
import NIOPosix
import Testing

/// A receive whose process did not run past its deadline (stopped, suspended, starved): what
/// arrived meanwhile is read only after the timer fires on waking, and used to lose to a timeout
/// this side did not cause (a suspension walkthrough: a desktop frozen while its phone answered
/// timed out in 4 runs of 6 with the answer in its socket).
@Suite("Message inbox: a wait the process slept through", .serialized, .timeLimit(.minutes(1)))
struct MessageInboxFreezeTests {
    @Test("a timer that fires more than a second late gives the wait a grace, in which a message that comes on waking wins; an ordinary timer is not extended")
    func frozenTimerGetsAGrace() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let inbox = MessageInbox<[UInt8]>(timerLoop: loop)
        // The loop cannot run for 1.6 s: the 300 ms timer fires 1.3 s late.
        loop.execute { Thread.sleep(forTimeInterval: 1.6) }
        DispatchQueue.global().asyncAfter(deadline: .now() + 1.8) { inbox.push([7]) }
        let started = ContinuousClock.now
        let item = try await inbox.next(timeout: .milliseconds(300), operation: "receive")
        #expect(item == [7])
        #expect(ContinuousClock.now - started < .seconds(3))

        // Running normally, the timeout comes on time, without the grace.
        let quiet = MessageInbox<[UInt8]>(timerLoop: loop)
        let before = ContinuousClock.now
        let error = await #expect(throws: RuntimeError.self) { _ = try await quiet.next(timeout: .milliseconds(300), operation: "receive") }
        #expect(error?.code == .timeout)
        #expect(ContinuousClock.now - before < .milliseconds(300) + .milliseconds(450), "no grace for a timer on time")
        try await group.shutdownGracefully()
    }
}
