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
        #expect(noRequest.message == "the desktop sent no request within 10 s after the handshake (or the relay did not pass it on)", "\(noRequest.message)")
    }

    @Test("an account list names each account once with its count, at most 10, so a large store does not make a line of thousands")
    func accountList() {
        #expect(PhoneAuthenticator.accountList(["alice", "bob"]) == "alice, bob")
        #expect(PhoneAuthenticator.accountList(Array(repeating: "fz", count: 159) + ["alice"]) == "fz ×159, alice")
        let many = (1...25).map { "user\($0)" }
        #expect(PhoneAuthenticator.accountList(many) == many.prefix(10).joined(separator: ", ") + ", and 15 more name(s)")
        // A relying party's names: a line break or a terminal escape in one cannot forge a line
        // or act on the terminal (it reached stderr raw in the account refusal).
        #expect(
            PhoneAuthenticator.accountList(["evil\u{1B}[31mRED\nerror: forged", "a\u{202E}b", "evil\u{1B}[31mRED\nerror: forged"])
                == "evil\\u{1B}[31mRED\\u{A}error: forged ×2, a\\u{202E}b")
    }
}
