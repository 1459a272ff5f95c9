import HybridCore
@testable import HybridRuntime
import Testing

/// `HybridHarness.runBoth`, the harness's two sides at once: which error a failed transaction throws.
@Suite("Harness: which side's error a transaction throws", .timeLimit(.minutes(1)))
struct RunBothTests {
    @Test("a side that only saw its peer's failure close (1011) gives way to the peer's own error, even when it reports first")
    func causeWinsOverItsClose() async throws {
        let closedByPeer = TransactionError(
            side: .phone, step: "waiting for the desktop's request",
            underlying: RuntimeError.closed(.internalError, "the desktop ended the transaction after an error"))
        let cause = TransactionError(
            side: .desktop, step: "waiting for the handshake response", underlying: RuntimeError(.handshakeFailed, "broken"))
        do {
            _ = try await HybridHarness.runBoth(
                phone: { throw closedByPeer },
                desktop: {
                    // The failing side closes the tunnel before it throws: its error comes second.
                    try await Task.sleep(for: .milliseconds(50))
                    throw cause
                })
            Issue.record("runBoth returned although both sides failed")
        } catch let error as TransactionError {
            #expect(error.side == .desktop)
            #expect(error.step == "waiting for the handshake response")
        }
    }

    @Test("any other first error is thrown as it came, and the other side is cancelled")
    func firstErrorOtherwise() async throws {
        let first = TransactionError(side: .phone, step: "creating the tunnel", underlying: RuntimeError(.connectionFailed, "refused"))
        do {
            _ = try await HybridHarness.runBoth(
                phone: { throw first },
                desktop: {
                    try await Task.sleep(for: .seconds(30))  // cancelled, not waited for
                    throw RuntimeError(.timeout, "not reached")
                })
            Issue.record("runBoth returned although the phone failed")
        } catch let error as TransactionError {
            #expect(error.side == .phone)
            #expect(error.step == "creating the tunnel")
        }
    }
}
