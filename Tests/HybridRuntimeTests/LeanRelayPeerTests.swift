import HybridCore
@testable import HybridRuntime
import NIOCore
import NIOEmbedded
import Testing

/// The load generator's hand-written client (`LeanRelayPeer`) on the relay's frames: after a valid
/// 101, a frame it cannot take ends the connection with the specific error, and a good message,
/// sent whole or in fragments, is delivered.
@Suite("Load generator client: frames from the relay")
struct LeanRelayPeerTests {
    /// A peer on an embedded channel that has had its 101; returns the channel, the peer and what it
    /// delivered or ended with.
    private static func upgraded(maxMessageSize: Int = 64) throws -> (EmbeddedChannel, LeanRelayPeer, LockedBox<[[UInt8]]>, LockedBox<RuntimeError?>) {
        let channel = EmbeddedChannel()
        let upgrade = channel.eventLoop.makePromise(of: [UInt8]?.self)
        let peer = LeanRelayPeer(path: "/cable/new/00", authority: "127.0.0.1:1", maxMessageSize: maxMessageSize, upgrade: upgrade)
        let messages = LockedBox<[[UInt8]]>([])
        let ended = LockedBox<RuntimeError?>(nil)
        peer.onMessage = { buffer in messages.update { $0.append(Array(buffer.readableBytesView)) } }
        peer.onEnd = { error in ended.update { $0 = error } }
        try channel.pipeline.syncOperations.addHandler(peer)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let request = String(buffer: try #require(try channel.readOutbound(as: ByteBuffer.self)))
        let key = try #require(request.split(separator: "\r\n").first { $0.hasPrefix("Sec-WebSocket-Key: ") }?.dropFirst(19))
        let head = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: \(WebSocketAccept.value(forKey: String(key)))\r\nSec-WebSocket-Protocol: fido.cable\r\n"
            + "X-caBLE-Routing-ID: 0A0B0C\r\n\r\n"
        try channel.writeInbound(ByteBuffer(string: head))
        #expect(try upgrade.futureResult.wait() == [0x0A, 0x0B, 0x0C])
        return (channel, peer, messages, ended)
    }

    @Test("a message whole and in two fragments is delivered; a frame over the limit is .messageTooLarge")
    func framesAndLimit() throws {
        let (channel, _, messages, ended) = try Self.upgraded()
        try channel.writeInbound(ByteBuffer(bytes: HostileWire.frame(opcode: 0x2, [1, 2], key: nil)))
        try channel.writeInbound(ByteBuffer(bytes: HostileWire.frame(opcode: 0x2, [3], fin: false, key: nil)))
        try channel.writeInbound(ByteBuffer(bytes: HostileWire.frame(opcode: 0x0, [4], key: nil)))
        #expect(messages.value == [[1, 2], [3, 4]])
        #expect(ended.value == nil)
        // 65 bytes announced against a 64-byte limit: refused from the header.
        try channel.writeInbound(ByteBuffer(bytes: [0x82, 65]))
        #expect(ended.value?.code == .messageTooLarge)
        _ = try? channel.finish(acceptAlreadyClosed: true)
    }

    @Test("a fragmented ping from the relay is a .protocolViolation")
    func brokenControlFrame() throws {
        let (channel, _, _, ended) = try Self.upgraded()
        try channel.writeInbound(ByteBuffer(bytes: HostileWire.frame(opcode: 0x9, [1], fin: false, key: nil)))
        #expect(ended.value?.code == .protocolViolation)
        _ = try? channel.finish(acceptAlreadyClosed: true)
    }

    @Test("a refused upgrade says the relay's status, reason phrase and text, also when the body comes in a later read or not at all")
    func refusalCarriesTheRelaysReason() throws {
        func refused(_ parts: [String], close: Bool = false) throws -> RuntimeError? {
            let channel = EmbeddedChannel()
            let upgrade = channel.eventLoop.makePromise(of: [UInt8]?.self)
            let peer = LeanRelayPeer(path: "/cable/new/00", authority: "127.0.0.1:1", maxMessageSize: 64, upgrade: upgrade)
            try channel.pipeline.syncOperations.addHandler(peer)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
            _ = try channel.readOutbound(as: ByteBuffer.self)
            for part in parts { try channel.writeInbound(ByteBuffer(string: part)) }
            if close { _ = try? channel.close().wait() }
            defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
            do {
                _ = try upgrade.futureResult.wait()
                return nil
            } catch {
                return error as? RuntimeError
            }
        }
        let reason = "too many open tunnels (100); try again later"
        let head = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: \(reason.utf8.count)\r\n\r\n"
        let whole = try #require(try refused([head + reason]))
        #expect(whole.httpStatus == 503)
        #expect(whole.description.contains("503 Service Unavailable (\(reason))"), "\(whole)")
        // The body in a later read: the peer waits for it.
        let split = try #require(try refused([head, String(reason.prefix(10)), String(reason.dropFirst(10))]))
        #expect(split.description.contains("(\(reason))"), "\(split)")
        // The connection closes before the whole body: what arrived, with the status.
        let cut = try #require(try refused([head + String(reason.prefix(8))], close: true))
        #expect(cut.httpStatus == 503 && cut.description.contains("(too many)"), "\(cut)")
    }
}
