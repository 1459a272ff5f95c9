import Foundation
@testable import HybridRuntime
import NIOCore
import NIOPosix
import Synchronization

/// A server that answers every connection's request head with bytes a test writes by hand (any
/// 101 or refusal, right or wrong), for the client's upgrade checks. It records the request heads.
final class ScriptedHTTPServer: Sendable {
    private let channel: Channel
    private let requests: RequestLog

    /// The bound port.
    let port: Int

    private init(channel: Channel, requests: RequestLog) {
        self.channel = channel
        self.requests = requests
        self.port = channel.localAddress?.port ?? 0
    }

    /// Starts a server on 127.0.0.1 that answers a request head with `respond(head)` and then
    /// closes the connection if `closeAfter`. What a client sends after its head is answered with
    /// `reply(connection, bytes)` (`connection`: 1 for the first request head, …): a test's relay
    /// that answers pings on some connections only.
    static func start(
        closeAfter: Bool = false, reply: @escaping @Sendable (_ connection: Int, _ bytes: [UInt8]) -> [UInt8] = { _, _ in [] },
        _ respond: @escaping @Sendable (String) -> [UInt8]
    ) async throws -> ScriptedHTTPServer {
        let requests = RequestLog()
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = ScriptedResponder(requests: requests, closeAfter: closeAfter, reply: reply, respond: respond)
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
        let channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        return ScriptedHTTPServer(channel: channel, requests: requests)
    }

    /// A 101 for `request` (the right Sec-WebSocket-Accept, `fido.cable` selected) with `headers` more.
    static func switching(_ request: String, headers: [String] = []) -> String {
        let key = header("Sec-WebSocket-Key", in: request) ?? ""
        let lines = [
            "HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade",
            "Sec-WebSocket-Accept: \(WebSocketAccept.value(forKey: key))", "Sec-WebSocket-Protocol: fido.cable",
        ] + headers
        return lines.joined(separator: "\r\n") + "\r\n\r\n"
    }

    /// The request heads received so far (up to and including the blank line).
    var receivedRequests: [String] { requests.heads.withLock { $0 } }

    /// The bytes clients sent after their request heads (their WebSocket frames), in arrival order.
    var receivedAfterRequests: [UInt8] { requests.after.withLock { $0 } }

    func stop() async {
        try? await channel.close().get()
    }

    /// The value of header `name` (case-insensitive) in a request head.
    static func header(_ name: String, in head: String) -> String? {
        for line in head.components(separatedBy: "\r\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == name.lowercased() {
                return parts[1].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }
}

private final class RequestLog: Sendable {
    let heads = Mutex<[String]>([])
    /// What clients sent after the request heads (their WebSocket frames).
    let after = Mutex<[UInt8]>([])
}

private final class ScriptedResponder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let requests: RequestLog
    private let closeAfter: Bool
    private let respond: @Sendable (String) -> [UInt8]
    private let reply: @Sendable (Int, [UInt8]) -> [UInt8]
    private var received: [UInt8] = []
    private var answered = false
    /// This connection's number among the request heads (1 for the first).
    private var connection = 0

    init(
        requests: RequestLog, closeAfter: Bool, reply: @escaping @Sendable (Int, [UInt8]) -> [UInt8],
        respond: @escaping @Sendable (String) -> [UInt8]
    ) {
        self.requests = requests
        self.closeAfter = closeAfter
        self.reply = reply
        self.respond = respond
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !answered else {
            let bytes = Array(unwrapInboundIn(data).readableBytesView)
            requests.after.withLock { $0 += bytes }
            let answer = reply(connection, bytes)
            if !answer.isEmpty { context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: answer)), promise: nil) }
            return
        }
        received += unwrapInboundIn(data).readableBytesView
        let text = String(decoding: received, as: UTF8.self)
        guard let end = text.range(of: "\r\n\r\n") else { return }
        answered = true
        let head = String(text[..<end.upperBound])
        connection = requests.heads.withLock { heads in
            heads.append(head)
            return heads.count
        }
        let channel = context.channel
        let closeAfter = self.closeAfter
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: respond(head)))).whenComplete { _ in
            if closeAfter { channel.close(promise: nil) }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
