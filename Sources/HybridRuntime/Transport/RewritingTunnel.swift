import Synchronization

/// A ``TunnelTransport`` around another that lets a protocol test see, change or drop each message
/// one end of a tunnel sends or receives, and keeps what passed: the tool for tamper tests ("flip a
/// byte of the third message the desktop receives, expect `decryptionFailed`") and transcripts.
///
/// Wrap either end with `HybridHarness.transactInMemory(…, wrapPhone:, wrapDesktop:)`, or wrap the
/// transports you give the drivers yourself. Messages are numbered from 1 in each direction, as the
/// end sees them: for the desktop, received message 1 is the handshake answer, 2 the post-handshake
/// message, 3 the update message, 4 the response; sent message 1 is the handshake, 2 the request,
/// 3 the shutdown. A rewrite returns the bytes to pass on, or `nil` to drop the message (the other
/// end then waits for it until its timeout).
///
/// It passes ``receiveIfReady()``, ``awaitIncoming()`` and ``close(code:reason:)`` on, as a wrapper must, and sends a
/// batch (``send(contentsOf:)``) as a batch.
public final class RewritingTunnel: TunnelTransport {
    /// Given a message's number (from 1, per direction) and its bytes, the bytes to pass on, or
    /// `nil` to drop it.
    public typealias Rewrite = @Sendable (_ number: Int, _ message: [UInt8]) -> [UInt8]?

    private struct State {
        var sent = 0
        var received = 0
        var sentMessages: [[UInt8]] = []
        var receivedMessages: [[UInt8]] = []
    }

    /// The end it wraps.
    public let base: any TunnelTransport
    private let rewriteSent: Rewrite
    private let rewriteReceived: Rewrite
    private let state = Mutex(State())

    /// Wraps `base`; `sent` sees each message this end sends, `received` each one it receives.
    public init(
        _ base: any TunnelTransport, sent: @escaping Rewrite = { _, message in message },
        received: @escaping Rewrite = { _, message in message }
    ) {
        self.base = base
        self.rewriteSent = sent
        self.rewriteReceived = received
    }

    /// What this end sent, after the rewrites (dropped messages left out), in order.
    public var sentMessages: [[UInt8]] { state.withLock { $0.sentMessages } }
    /// What this end received and handed on, after the rewrites, in order.
    public var receivedMessages: [[UInt8]] { state.withLock { $0.receivedMessages } }

    public func send(_ message: [UInt8]) async throws {
        guard let passed = outgoing(message) else { return }
        try await base.send(passed)
    }

    public func send(contentsOf messages: [[UInt8]]) async throws {
        let passed = messages.compactMap(outgoing)
        guard !passed.isEmpty else { return }
        try await base.send(contentsOf: passed)
    }

    public func receive(timeout: Duration) async throws -> [UInt8] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let message = try await base.receive(timeout: max(deadline - ContinuousClock.now, .zero))
            if let passed = incoming(message) { return passed }
        }
    }

    public func receiveIfReady() -> [UInt8]? {
        while let message = base.receiveIfReady() {
            if let passed = incoming(message) { return passed }
        }
        return nil
    }

    public func awaitIncoming() async { await base.awaitIncoming() }

    public func close(code: WebSocketCloseCode, reason: String) async {
        await base.close(code: code, reason: reason)
    }

    private func outgoing(_ message: [UInt8]) -> [UInt8]? {
        pass(message, through: rewriteSent, counted: \.sent, kept: \.sentMessages)
    }

    private func incoming(_ message: [UInt8]) -> [UInt8]? {
        pass(message, through: rewriteReceived, counted: \.received, kept: \.receivedMessages)
    }

    /// Numbers `message` in its direction, rewrites it and keeps what passed. The rewrite runs
    /// outside the lock, so it may read ``sentMessages`` or ``receivedMessages``.
    private func pass(
        _ message: [UInt8], through rewrite: Rewrite, counted counter: WritableKeyPath<State, Int>,
        kept log: WritableKeyPath<State, [[UInt8]]>
    ) -> [UInt8]? {
        let number = state.withLock { state in
            state[keyPath: counter] += 1
            return state[keyPath: counter]
        }
        guard let passed = rewrite(number, message) else { return nil }
        state.withLock { $0[keyPath: log].append(passed) }
        return passed
    }
}
