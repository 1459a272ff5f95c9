import Foundation
@testable import HybridSim
import Synchronization
import Testing

/// The terminal's lines for the phone's questions: one reader for the process, so a question that
/// timed out leaves nothing behind to swallow the next answer (as a thread per question did, which
/// in `phone --listen` lost the first line typed for the next question).
@Suite("Phone: answers read from the terminal", .timeLimit(.minutes(1)))
struct TerminalLinesTests {
    /// Lines a test types: `read` blocks until one is typed or the input ends.
    final class Keyboard: Sendable {
        private let typed = Mutex<[String?]>([])
        private let available = DispatchSemaphore(value: 0)
        /// How many lines the reader took.
        let taken = Mutex(0)

        func type(_ line: String?) {
            typed.withLock { $0.append(line) }
            available.signal()
        }

        func read() -> String? {
            available.wait()
            taken.withLock { $0 += 1 }
            return typed.withLock { $0.removeFirst() }
        }

        /// Waits (a condition poll with a deadline) until the reader took `count` lines.
        func waitUntilTaken(_ count: Int) async throws {
            let deadline = ContinuousClock.now + .seconds(10)
            while taken.withLock({ $0 }) < count, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(taken.withLock { $0 } >= count)
        }
    }

    @Test("a question that timed out leaves no reader behind: the next question gets the next line")
    func timedOutQuestionDoesNotSwallowTheNextAnswer() async throws {
        let keyboard = Keyboard()
        let lines = TerminalLines(read: keyboard.read)
        #expect(await lines.next(timeout: .milliseconds(50)) == nil)
        async let answer = lines.next(timeout: .seconds(10))
        keyboard.type("2")
        #expect(await answer == "2")
    }

    @Test("lines typed ahead answer the next questions in order, as a script feeding a terminal does")
    func typedAheadAnswers() async throws {
        let keyboard = Keyboard()
        let lines = TerminalLines(read: keyboard.read)
        keyboard.type("zed")
        keyboard.type("2")
        #expect(await lines.next(timeout: .seconds(10)) == "zed")
        #expect(await lines.next(timeout: .seconds(10)) == "2")
    }

    @Test("a withdrawn question (its task cancelled) ends at once, and the end of input ends every later one")
    func cancelledAndEnded() async throws {
        let keyboard = Keyboard()
        let lines = TerminalLines(read: keyboard.read)
        let asking = Task { await lines.next(timeout: .seconds(30)) }
        asking.cancel()
        #expect(await asking.value == nil)
        keyboard.type(nil)
        try await keyboard.waitUntilTaken(1)
        let started = ContinuousClock.now
        #expect(await lines.next(timeout: .seconds(30)) == nil)
        #expect(ContinuousClock.now - started < .seconds(10), "the end of input answers at once")
    }

    // (Whether the timer's task or the registration runs first is the scheduler's choice; here the
    // registration wins in practice, so the path where the timer fires first, `abandoned`, is not
    // forced by this test.)
    @Test("a question with no time at all (a zero timeout) returns at once, 200 times in a row, and the next line still answers the next question")
    func timeoutBeforeRegistration() async throws {
        let keyboard = Keyboard()
        let lines = TerminalLines(read: keyboard.read)
        let started = ContinuousClock.now
        for _ in 0..<200 {
            #expect(await lines.next(timeout: .zero) == nil)
        }
        #expect(ContinuousClock.now - started < .seconds(20), "no question waited for a line")
        async let answer = lines.next(timeout: .seconds(10))
        keyboard.type("bob")
        #expect(await answer == "bob")
    }
}
