import HybridRuntime
import NIOPosix
import Testing

/// The phone driver bounds the authenticator's answer by `SessionTimeouts.userAction`, so a user
/// (or responder) that never answers cannot keep the phone running after the desktop gave up.
@Suite struct SessionDriverResponderTests {
    @Test func aPromptAnswerIsPassedThrough() async throws {
        let response = try await AuthenticatorDriver.answer([0x02, 0xA0], within: .seconds(5)) { request in
            [0x00] + request
        }
        #expect(response == [0x00, 0x02, 0xA0])
    }

    @Test func aResponderThatNeverAnswersTimesOut() async throws {
        let start = ContinuousClock.now
        do {
            _ = try await AuthenticatorDriver.answer([0x02], within: .milliseconds(300)) { _ in
                try? await Task.sleep(for: .seconds(30))  // the silent responder under test, not a synchronisation
                return [0x00]
            }
            Issue.record("the slow responder's answer was accepted")
        } catch let error as RuntimeError {
            #expect(error.code == .timeout)
        }
        // Generous bound: it must not wait for the responder's 30 s.
        #expect(ContinuousClock.now - start < .seconds(10))
    }

    @Test func aResponderThatIgnoresCancellationStillTimesOut() async throws {
        let start = ContinuousClock.now
        await #expect(throws: RuntimeError.self) {
            _ = try await AuthenticatorDriver.answer([0x02], within: .milliseconds(300)) { _ in
                // Busy for 3 s without checking for cancellation.
                let end = ContinuousClock.now + .seconds(3)
                while ContinuousClock.now < end { await Task.yield() }
                return [0x00]
            }
        }
        #expect(ContinuousClock.now - start < .seconds(3))
    }

    @Test func aResponderThatNeverAnswersTimesOutOnAnEventLoop() async throws {
        // As under `hybrid-sim bench`: the driver runs on an event loop, so its deadline is a timer
        // on that loop (`DeadlineTimer.loop`), not a sleeping task.
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let start = ContinuousClock.now
        let outcome: Result<[UInt8], any Error> = await withTaskExecutorPreference(EventLoopTaskExecutor(loop)) {
            #expect(MultiThreadedEventLoopGroup.currentEventLoop != nil, "the test must run on the loop")
            return await Result {
                try await AuthenticatorDriver.answer([0x02], within: .milliseconds(300)) { _ in
                    try? await Task.sleep(for: .seconds(30))  // the silent responder under test
                    return [0x00]
                }
            }
        }
        guard case .failure(let error as RuntimeError) = outcome else {
            Issue.record("expected the responder's timeout, got \(outcome)")
            return
        }
        #expect(error.code == .timeout)
        #expect(ContinuousClock.now - start < .seconds(10))
    }

    @Test func aCancelledDriverStopsWaitingForItsResponderAtOnce() async throws {
        // A harness shutting down, or an app embedding the phone, cancels the driver's task while
        // the user still decides: the wait ends then, not at the 30 s deadline.
        let asked = AsyncStream<Void>.makeStream()
        let waiting = Task {
            try await AuthenticatorDriver.answer([0x02], within: .seconds(30)) { _ in
                asked.continuation.finish()
                try? await Task.sleep(for: .seconds(30))  // the user still deciding, not a synchronisation
                return [0x00]
            }
        }
        for await _ in asked.stream {}
        let start = ContinuousClock.now
        waiting.cancel()
        await #expect(throws: CancellationError.self) { _ = try await waiting.value }
        #expect(ContinuousClock.now - start < .seconds(10))
    }
}
