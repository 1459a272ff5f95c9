/// One end of a caBLE tunnel: ordered, message-oriented, binary.
///
/// Implemented by ``WebSocketTunnel`` (a real connection through the tunnel service) and
/// ``InMemoryTunnel`` (two ends wired together in one process, for tests). Session drivers are
/// written against this protocol so they run unchanged over both.
public protocol TunnelTransport: Sendable {
    /// Sends one message; it arrives at the other end as exactly one ``receive(timeout:)`` result.
    ///
    /// Throws ``RuntimeError`` with code `.closed` once either end has closed.
    func send(_ message: [UInt8]) async throws

    /// Sends several messages in order; each arrives as one ``receive(timeout:)`` result, as if
    /// sent one by one. A transport may hand them to its socket in one write (``WebSocketTunnel``
    /// does); the default sends them one by one with ``send(_:)``.
    ///
    /// Throws like ``send(_:)``; messages before the failing one may have been sent.
    func send(contentsOf messages: [[UInt8]]) async throws

    /// Returns the next message from the other end, in order.
    ///
    /// Throws ``RuntimeError`` with code `.timeout` when nothing arrives within `timeout`, and with
    /// code `.closed` (carrying the close code and reason) once the other end or the relay closed the
    /// tunnel and every message received before the close has been returned.
    func receive(timeout: Duration) async throws -> [UInt8]

    /// The next message if it has already arrived, without waiting; `nil` when none is waiting (or
    /// the transport cannot tell). The phone asks before it sends its response, so that a desktop
    /// that ended the transaction meanwhile is noticed (``AuthenticatorDriver``). A wrapper around
    /// another transport must pass it on (there is deliberately no default, as for `close`).
    func receiveIfReady() -> [UInt8]?

    /// Returns once a message or the tunnel's end is waiting to be read (at once if one is), without
    /// reading it; or once the calling task is cancelled. While its user decides, the phone's driver
    /// awaits it, so that a desktop that ended the transaction or left withdraws the question at
    /// once instead of after the user answered (``AuthenticatorDriver``). The default, for a
    /// transport that cannot tell, returns only when cancelled; a wrapper should pass it on.
    func awaitIncoming() async

    /// Closes this end with `code` and `reason`; the other end then sees `.closed` with them.
    /// Idempotent, never throws. The drivers close with 1000 after a transaction and with 1011
    /// after a failure, so the other end does not take a failure for an orderly end: a wrapper
    /// around another transport must pass both on (there is deliberately no default).
    func close(code: WebSocketCloseCode, reason: String) async
}

extension TunnelTransport {
    /// Closes normally (1000).
    public func close() async {
        await close(code: .normalClosure, reason: "")
    }

    /// Closes after the transaction on this side failed with `error`: code 1011 (internal error)
    /// and a reason naming `side` and the step it failed in, so that the peer reports a failure
    /// rather than an orderly end. The reason travels in clear through the relay, so it carries the
    /// step only, never the error's detail.
    func closeAfterFailure(_ error: any Error, side: TransactionError.Side) async {
        var reason = "the \(side) ended the transaction after an error"
        if let failure = error as? TransactionError { reason += " (\(failure.step))" }
        await close(code: TransactionError.failureCloseCode, reason: reason)
    }

    /// Waits until the calling task is cancelled: a transport that cannot tell when something
    /// arrived never interrupts the phone's user.
    public func awaitIncoming() async {
        let (cancelled, signal) = AsyncStream<Never>.makeStream()
        await withTaskCancellationHandler {
            for await _ in cancelled {}
        } onCancel: {
            signal.finish()
        }
    }

    /// Sends the messages one by one with ``send(_:)``.
    public func send(contentsOf messages: [[UInt8]]) async throws {
        for message in messages { try await send(message) }
    }

}

extension TransactionError {
    /// The close code a side sends when its transaction failed (``TunnelTransport/closeAfterFailure(_:side:)``).
    static let failureCloseCode = WebSocketCloseCode.internalError

    /// Whether this side failed only because its peer closed the tunnel after failing: the peer's
    /// own error is the cause.
    var endedByPeerFailure: Bool {
        guard let closed = underlying as? RuntimeError else { return false }
        return closed.code == .closed && closed.closeCode == Self.failureCloseCode
    }
}
