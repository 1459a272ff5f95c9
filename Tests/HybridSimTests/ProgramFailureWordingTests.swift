import HybridRuntime
@testable import HybridSim
import Testing

/// How a driver's failure reads: a tunnel whose connection dropped (1006, no close frame: a relay or
/// proxy killed) names the relay and what may have happened; one a peer closed says only how.
@Suite("Program failures: a dropped tunnel in words")
struct ProgramFailureWordingTests {
    @Test("1006 without a close frame names the relay and says it may have stopped; a 1000 from the peer does not")
    func droppedConnection() {
        let relay = "ws://127.0.0.1:47380"
        let dropped = ProgramFailure.fromTransaction(
            TransactionError(
                side: .desktop, step: "waiting for the handshake response",
                underlying: RuntimeError.closed(.abnormalClosure, "connection closed without a close frame")),
            relayURL: relay)
        #expect(dropped.kind == .network)
        #expect(
            dropped.message
                == "the tunnel was closed while waiting for the handshake response: 1006 (connection lost): connection closed without a close frame "
                + "(the connection to the relay at ws://127.0.0.1:47380 dropped: the relay, or a proxy in front of it, stopped or restarted?)")
        let closed = ProgramFailure.fromTransaction(
            TransactionError(side: .phone, step: "waiting for the request", underlying: RuntimeError.closed(.normalClosure, "")),
            relayURL: relay)
        #expect(closed.kind == .network)
        #expect(!closed.message.contains("dropped"), "\(closed.message)")
        #expect(closed.message.hasPrefix("the tunnel was closed while waiting for the request: 1000"), "\(closed.message)")
    }
}
