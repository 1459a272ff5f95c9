import CTAP2
import HybridCore
@testable import HybridRuntime
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOWebSocket
import Testing

/// A linked phone's push channel (`/cable/listen`) on an `EmbeddedChannel`: what the relay holds
/// for a phone that does not read is bounded, as for a tunnel connection.
@Suite struct ListenerHandlerTests {
    private static let contactID = Array("listener-handler".utf8)

    /// A registry on the channel's loop with `handler` attached as the phone listening on ``contactID``.
    private static func listening() throws -> (EmbeddedChannel, RelayRegistry) {
        let channel = EmbeddedChannel()
        let registry = RelayRegistry(
            eventLoop: channel.embeddedEventLoop, configuration: RelayConfiguration(), statistics: RelayStatisticsBox(),
            logger: Logger(label: "listener-test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let handler = ListenerHandler(directory: registry.directory, contactID: contactID, closeHandshakeTimeout: .seconds(1))
        try channel.pipeline.syncOperations.addHandler(handler)
        registry.directory.attach(handler, contactID: contactID)
        return (channel, registry)
    }

    private static func outbound(_ channel: EmbeddedChannel) throws -> [WebSocketFrame] {
        var frames: [WebSocketFrame] = []
        while let frame = try channel.readOutbound(as: WebSocketFrame.self) { frames.append(frame) }
        return frames
    }

    @Test("a ping flood gets the pong budget (16 at once), and no pong while the phone does not read")
    func pongBudget() throws {
        let (channel, _) = try Self.listening()
        let ping = WebSocketFrame(fin: true, opcode: .ping, data: channel.allocator.buffer(bytes: [1, 2, 3]))
        // Not reading, with the whole budget left: no pong is queued behind what it does not read.
        channel.isWritable = false
        for _ in 0..<10 { try channel.writeInbound(ping) }
        #expect(try Self.outbound(channel).isEmpty)
        channel.isWritable = true
        for _ in 0..<100 { try channel.writeInbound(ping) }
        #expect(try Self.outbound(channel).filter { $0.opcode == .pong }.count == Int(PongBudget.burst))
    }

    @Test("a contact for a phone that does not read its pushes: 504, and its channel is closed with 1008")
    func notReadingIs504() throws {
        let (channel, registry) = try Self.listening()
        let payload = ClientPayload(pairingID: Array(repeating: 7, count: 8), clientNonce: Array(repeating: 9, count: 16), requestType: .getAssertion)
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: TunnelServicePath.contact(contactID: Self.contactID).path)
        head.headers.add(name: HybridConstants.clientPayloadHeader, value: payload.headerValue)

        channel.isWritable = false
        // A desktop still connected: a contact for a listening phone is routed on the loop's next
        // turn, once the requester is known to be there.
        let requester = EmbeddedChannel(loop: channel.embeddedEventLoop)
        try requester.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let pending = registry.directory.decideContact(contactID: Self.contactID, head: head, requester: requester)
        channel.embeddedEventLoop.run()
        let decision = try pending.wait()
        guard case .reject(let rejection) = decision else {
            Issue.record("expected a refusal, got \(decision)")
            return
        }
        #expect(rejection.status == .gatewayTimeout)
        let frames = try Self.outbound(channel)
        #expect(frames.map(\.opcode) == [.connectionClose], "no push was written")
        var body = try #require(frames.first).unmaskedData
        #expect(body.readInteger(as: UInt16.self) == WebSocketCloseCode.policyViolation.rawValue)
    }
}
