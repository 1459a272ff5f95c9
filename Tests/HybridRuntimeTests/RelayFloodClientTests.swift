import HybridCore
@testable import HybridRuntime
import NIOCore
import NIOEmbedded
import NIOWebSocket
import Testing

/// A relay that floods the phone or the desktop: pings it never reads the pongs of, or messages
/// faster than they are read. Memory must stay bounded (a ping flood once grew a phone to 8 GiB in
/// a minute: every ping queued a pong behind a socket nobody read).
@Suite("WebSocket client against a flooding relay", .timeLimit(.minutes(1)))
struct RelayFloodClientTests {
    private static func channel(inbox: MessageInbox<[UInt8]>) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        let handler = ClientFrameHandler(
            inbox: inbox, eventLoop: channel.eventLoop, maxMessageSize: 1 << 20, closeTimeout: .seconds(1))
        try channel.pipeline.syncOperations.addHandlers(ServerFrameCheck(), handler)
        return channel
    }

    private static func ping(_ channel: EmbeddedChannel) throws {
        try channel.writeInbound(WebSocketFrame(fin: true, opcode: .ping, data: channel.allocator.buffer(bytes: [1, 2, 3])))
    }

    private static func pongsWritten(_ channel: EmbeddedChannel) throws -> Int {
        var count = 0
        while let frame = try channel.readOutbound(as: WebSocketFrame.self) {
            if frame.opcode == .pong { count += 1 }
        }
        return count
    }

    @Test("pings are answered within the pong budget, and not at all while the relay does not read")
    func pingFloodIsBounded() throws {
        let inbox = MessageInbox<[UInt8]>()
        let channel = try Self.channel(inbox: inbox)
        for _ in 0..<1_000 { try Self.ping(channel) }
        #expect(try Self.pongsWritten(channel) == Int(PongBudget.burst))
        // A second later the budget has room for a few more.
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        for _ in 0..<1_000 { try Self.ping(channel) }
        #expect(try Self.pongsWritten(channel) == Int(PongBudget.perSecond))
        // A relay that does not read (the socket's buffer is full) gets no pong queued at all.
        channel.embeddedEventLoop.advanceTime(by: .seconds(60))
        channel.isWritable = false
        for _ in 0..<1_000 { try Self.ping(channel) }
        try channel.writeInbound(WebSocketFrame(fin: true, opcode: .ping, data: channel.allocator.buffer(bytes: [9, 9])))
        #expect(try Self.pongsWritten(channel) == 0)
        // Once it reads again, the latest ping alone is answered (RFC 6455 §5.5.3).
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        let pong = try #require(try channel.readOutbound(as: WebSocketFrame.self))
        #expect(pong.opcode == .pong && Array(pong.data.readableBytesView) == [9, 9])
        #expect(try Self.pongsWritten(channel) == 0)
        #expect(inbox.terminalError == nil, "pings alone do not end the tunnel")
        _ = try? channel.finish()
    }

    @Test("more unread messages than a caBLE peer ever has in flight end the tunnel with 1008; those before are still read")
    func messageFloodEndsTheTunnel() async throws {
        let inbox = MessageInbox<[UInt8]>()
        let channel = try Self.channel(inbox: inbox)
        for index in 0..<(ClientFrameHandler.maxUnreadMessages + 10) {
            try channel.writeInbound(WebSocketFrame(fin: true, opcode: .binary, data: channel.allocator.buffer(bytes: [UInt8(index)])))
        }
        #expect(inbox.pendingCount == ClientFrameHandler.maxUnreadMessages)
        // The close frame sent: 1008 (policy violation).
        let close = try #require(try channel.readOutbound(as: WebSocketFrame.self))
        #expect(close.opcode == .connectionClose)
        #expect(Array(close.data.readableBytesView.prefix(2)) == [0x03, 0xF0])  // masked by the encoder, later
        for index in 0..<ClientFrameHandler.maxUnreadMessages {
            #expect(try await inbox.next(timeout: .seconds(1), operation: "test") == [UInt8(index)])
        }
        await #expect(throws: RuntimeError.self) { _ = try await inbox.next(timeout: .seconds(1), operation: "test") }
        #expect(inbox.terminalError?.reason == "the relay sent more than 32 messages that were not read yet")
        #expect(inbox.terminalError?.closeCode == .policyViolation)
        _ = try? channel.finish()
    }
}
