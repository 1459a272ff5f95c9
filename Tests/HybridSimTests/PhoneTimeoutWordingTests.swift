import HybridCore
import HybridRuntime
@testable import HybridSim
import Testing

/// What the phone says when the desktop goes quiet, in terms of what the phone can see (found by a
/// hostile-desktop sweep: a desktop that connected and sent nothing was told it never connected,
/// and one that sent no request heard about `/cable/new`).
@Suite("Phone: the desktop's silences in words")
struct PhoneTimeoutWordingTests {
    @Test("no handshake: allows for a desktop that connected and sent nothing; no request: names the wait after the handshake")
    func silences() throws {
        let proximity = try ProximityEndpoint(parsing: "udp://127.0.0.1:47002")
        let noHandshake = PhoneProgram.phoneFailure(
            TransactionError(side: .phone, step: "waiting for the desktop's handshake",
                             underlying: RuntimeError.timeout("receive from /cable/new", after: .seconds(5))),
            relayURL: "ws://127.0.0.1:47001", proximity: proximity, timeout: .seconds(5))
        #expect(noHandshake.kind == .timeout)
        #expect(noHandshake.message.hasPrefix(
            "no handshake from the desktop within 5 s (it did not connect, or connected and sent nothing): is it scanning udp://127.0.0.1:47002"),
            "\(noHandshake.message)")
        let noRequest = PhoneProgram.phoneFailure(
            TransactionError(side: .phone, step: "waiting for the desktop's request",
                             underlying: RuntimeError.timeout("receive from /cable/new", after: .seconds(10))),
            relayURL: "ws://127.0.0.1:47001", proximity: proximity, timeout: .seconds(120))
        #expect(noRequest.kind == .timeout)
        #expect(noRequest.message == "the desktop sent no request within 10 s after the handshake", "\(noRequest.message)")
    }
}
