/// One end of a tunnel whose other end lives in the same process: no sockets, no relay.
///
/// Built in pairs with ``pair()``. Messages keep their order and boundaries; closing one end makes
/// the other end's ``receive(timeout:)`` throw `.closed` (after any messages already sent), exactly
/// like a relay forwarding a WebSocket close. Used to test session drivers without networking.
///
/// Implementation note: each end owns a `MessageInbox` (a locked FIFO with a single waiting
/// reader and a timer) rather than an `AsyncStream`, because an `AsyncStream` iterator cannot be
/// shared across calls or given a per-call timeout without racing tasks.
public final class InMemoryTunnel: TunnelTransport {
    /// Messages sent by the other end, waiting to be received here.
    private let inbox: MessageInbox<[UInt8]>
    /// The other end's inbox.
    private let peerInbox: MessageInbox<[UInt8]>

    private init(inbox: MessageInbox<[UInt8]>, peerInbox: MessageInbox<[UInt8]>) {
        self.inbox = inbox
        self.peerInbox = peerInbox
    }

    /// Creates two connected ends: what one sends, the other receives.
    public static func pair() -> (InMemoryTunnel, InMemoryTunnel) {
        let first = MessageInbox<[UInt8]>()
        let second = MessageInbox<[UInt8]>()
        return (InMemoryTunnel(inbox: first, peerInbox: second), InMemoryTunnel(inbox: second, peerInbox: first))
    }

    /// Delivers `message` to the other end. Throws `.closed` once either end has closed.
    public func send(_ message: [UInt8]) async throws {
        if let terminal = inbox.terminalError { throw terminal }
        if let terminal = peerInbox.terminalError { throw terminal }
        peerInbox.push(message)
    }

    /// Returns once a ``receive(timeout:)`` is waiting (or this end has ended): a hand-off for
    /// tests that need a receive to be pending before they act.
    func receiveIsWaiting() async { await inbox.readerIsWaiting() }

    /// The next message from the other end; `.timeout` or `.closed` as described by ``TunnelTransport``.
    public func receive(timeout: Duration) async throws -> [UInt8] {
        try await inbox.next(timeout: timeout, operation: "receive from in-memory tunnel")
    }

    /// The next message from the other end if it is already here; `nil` otherwise.
    public func receiveIfReady() -> [UInt8]? { inbox.nextIfReady() }

    /// Returns once a message or the end is waiting to be read, or the calling task is cancelled.
    public func awaitIncoming() async { await inbox.awaitInput() }

    /// Closes with 1000 (normal closure).
    public func close() async {
        await close(code: .normalClosure, reason: "")
    }

    /// Closes both directions with `code`: the other end receives `.closed(code, reason)` once it has
    /// read what was already sent; this end's later calls throw `.closed` too. (It is `async` like
    /// ``TunnelTransport/close(code:reason:)``, which it implements, but never suspends.)
    public func close(code: WebSocketCloseCode, reason: String) async {
        peerInbox.finish(.closed(code, reason.isEmpty ? "peer closed the tunnel" : reason))
        inbox.finish(.closed(code, "closed locally"))
    }
}
