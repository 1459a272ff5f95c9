import HybridCore
@testable import HybridRuntime
import Logging
import NIOCore
import NIOEmbedded
import Testing

/// NIO may deliver a read to a handler from inside a flush that handler makes (after a write error
/// the channel drains its socket at once). The relay's peer handler flushes while it handles a frame
/// (a pong, a close echo), so it must take such a read without re-entering its frame reader: that
/// aborted the relay (Swift's exclusivity check) in a CI run, on a ping flood followed by a reset.
@Suite("Relay peer handler: a read delivered from inside its own flush")
struct RelayPeerReentrancyTests {
    /// Fires `extra` as a read into the handlers behind it from inside the first flush that passes it.
    final class ReadDuringFlush: ChannelOutboundHandler {
        typealias OutboundIn = ByteBuffer
        var extra: ByteBuffer?

        func flush(context: ChannelHandlerContext) {
            context.flush()
            if let extra {
                self.extra = nil
                context.fireChannelRead(NIOAny(extra))
            }
        }
    }

    @Test("a ping read during the pong's flush is answered after the first, in order, and the relay lives on")
    func readDuringFlush() throws {
        let (channel, _) = try embeddedRelayConnection(label: "reentrancy")
        let request = RawConnection.upgradeRequest(path: TunnelServicePath.new(tunnelID: randomTunnelID()).path)
        try channel.writeInbound(ByteBuffer(string: request))
        channel.embeddedEventLoop.run()  // NIO removes the request decoder on a later turn
        let head = String(buffer: try #require(try channel.readOutbound(as: ByteBuffer.self)))
        #expect(RawConnection.status(of: head) == 101)

        let flusher = ReadDuringFlush()
        flusher.extra = ByteBuffer(bytes: RawConnection.frame(opcode: 0x9, payload: [2]))
        try channel.pipeline.syncOperations.addHandler(flusher, position: .first)
        try channel.writeInbound(ByteBuffer(bytes: RawConnection.frame(opcode: 0x9, payload: [1])))

        var written: [UInt8] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { written += buffer.readableBytesView }
        let frames = RawConnection.serverFrames(in: written)
        #expect(frames.map(\.opcode) == [0xA, 0xA])
        #expect(frames.map(\.payload) == [[1], [2]])
        _ = try? channel.finish(acceptAlreadyClosed: true)
    }

    @Test("reads that arrive while one is handled wait, joined in order, and the read ends when none is left")
    func readsInOrder() throws {
        var reads = ReadsInOrder()
        var handled: [String] = []
        let first = reads.begin(ByteBuffer(string: "first"))
        var bytes = try #require(first)
        repeat {
            handled.append(String(buffer: bytes))
            if handled.count == 1 {
                // Delivered from inside the handling of "first": both wait, in order.
                let second = reads.begin(ByteBuffer(string: "second,"))
                let third = reads.begin(ByteBuffer(string: "third"))
                #expect(second == nil && third == nil)
            }
        } while reads.next(into: &bytes)
        #expect(handled == ["first", "second,third"])
        // The read is over: the next delivery is handled at once, with nothing queued behind it.
        let laterBegun = reads.begin(ByteBuffer(string: "later"))
        var later = try #require(laterBegun)
        #expect(String(buffer: later) == "later")
        let more = reads.next(into: &later)
        #expect(!more)
    }
}
