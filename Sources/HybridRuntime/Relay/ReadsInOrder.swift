import NIOCore

/// Keeps a hand-written frame reader from being re-entered. NIO may deliver a read to a handler
/// from inside a flush that handler makes while it handles the current read (after a write error the
/// channel drains its socket at once); a handler that flushes a pong or a close echo mid-read would
/// then re-enter its reader, which Swift's exclusivity check traps (a ping flood followed by a reset
/// aborted the relay that way). NIO's `ByteToMessageHandler` guards itself; `RelayPeerHandler` and
/// the load generator's `LeanRelayPeer` read frames by hand and use this instead:
///
/// ```swift
/// guard var bytes = reads.begin(unwrapInboundIn(data)) else { return }  // queued behind the current read
/// repeat { handle(bytes) } while reads.next(into: &bytes)
/// ```
///
/// Each call holds the state only for its own duration, so a read that arrives while `handle` runs
/// can call ``begin(_:)`` safely.
struct ReadsInOrder {
    private var reading = false
    private var queued: ByteBuffer?

    /// The bytes to handle now, or `nil` if a read is being handled: then they are queued behind it.
    mutating func begin(_ bytes: ByteBuffer) -> ByteBuffer? {
        guard reading else {
            reading = true
            return bytes
        }
        if queued == nil {
            queued = bytes
        } else {
            var more = bytes
            queued!.writeBuffer(&more)
        }
        return nil
    }

    /// After a read was handled: moves what arrived meanwhile into `bytes` and returns `true`, or
    /// ends the read and returns `false`.
    mutating func next(into bytes: inout ByteBuffer) -> Bool {
        guard let waiting = queued else {
            reading = false
            return false
        }
        queued = nil
        bytes = waiting
        return true
    }
}
