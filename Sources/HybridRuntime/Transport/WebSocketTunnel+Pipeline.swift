import HybridCore
import NIOCore
import NIOHTTP1
import NIOWebSocket

/// How the HTTP upgrade of a ``WebSocketTunnel`` ended.
enum ClientUpgradeOutcome: Sendable {
    /// 101: the 101 head and the installed frame handler.
    case upgraded(HTTPResponseHead, NIOLoopBound<ClientFrameHandler>)
    /// Any other status: the status and (up to 1 KiB of) the body, once read.
    case rejected(EventLoopFuture<(HTTPResponseStatus, String)>)
}

/// A connected channel whose upgrade is under way.
struct PendingUpgrade: Sendable {
    var channel: Channel
    var outcome: EventLoopFuture<ClientUpgradeOutcome>
    /// Closes the channel when the open's time budget runs out; cancelled on the event loop as
    /// soon as the upgrade succeeds.
    var timer: Scheduled<Void>? = nil
}

extension WebSocketTunnel {
    /// Installs the HTTP client + WebSocket upgrade pipeline on a fresh connection.
    static func configure(
        _ channel: Channel,
        host: String,
        port: Int,
        path: String,
        inbox: MessageInbox<[UInt8]>,
        options: Options
    ) throws -> PendingUpgrade {
        let maxMessage = options.maxIncomingMessageSize
        let closeTimeout = options.closeTimeout
        let upgrader = NIOTypedWebSocketClientUpgrader<ClientUpgradeOutcome>(
            maxFrameSize: maxMessage,
            enableAutomaticErrorHandling: false,
            upgradePipelineHandler: { channel, head in
                channel.eventLoop.makeCompletedFuture {
                    let handler = ClientFrameHandler(
                        inbox: inbox,
                        eventLoop: channel.eventLoop,
                        maxMessageSize: maxMessage,
                        closeTimeout: closeTimeout
                    )
                    try channel.pipeline.syncOperations.addHandlers(
                        NIOWebSocketFrameAggregator(
                            minNonFinalFragmentSize: 0,
                            maxAccumulatedFrameCount: 256,
                            maxAccumulatedFrameSize: maxMessage
                        ),
                        handler
                    )
                    return .upgraded(head, NIOLoopBound(handler, eventLoop: channel.eventLoop))
                }
            }
        )
        let authority = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: authority)
        headers.add(name: "Origin", value: options.origin ?? "ws://\(authority)")
        if options.offersSubprotocol {
            headers.add(name: "Sec-WebSocket-Protocol", value: HybridConstants.webSocketProtocol)
        }
        for (name, value) in options.extraHeaders { headers.add(name: name, value: value) }
        headers.add(name: "Content-Length", value: "0")
        let configuration = NIOTypedHTTPClientUpgradeConfiguration<ClientUpgradeOutcome>(
            upgradeRequestHead: HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers),
            upgraders: [upgrader],
            notUpgradingCompletionHandler: { channel in
                channel.eventLoop.makeCompletedFuture {
                    let reader = RejectedResponseReader(eventLoop: channel.eventLoop)
                    try channel.pipeline.syncOperations.addHandler(reader)
                    return .rejected(reader.response)
                }
            }
        )
        var pipeline = NIOUpgradableHTTPClientPipelineConfiguration(upgradeConfiguration: configuration)
        // Frames the relay sends right behind the 101 (buffered messages) arrive in the same read:
        // hand them to the WebSocket decoder instead of dropping them.
        pipeline.leftOverBytesStrategy = .forwardBytes
        let outcome = try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(
            configuration: pipeline
        )
        return PendingUpgrade(channel: channel, outcome: outcome)
    }
}

/// Reads the status and a short body of a refused upgrade.
final class RejectedResponseReader: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private static let maxBody = 1024
    private let promise: EventLoopPromise<(HTTPResponseStatus, String)>
    private var status: HTTPResponseStatus?
    private var body: [UInt8] = []
    private var done = false

    init(eventLoop: EventLoop) {
        promise = eventLoop.makePromise()
    }

    /// Status and body (trimmed, at most 1 KiB), once the response ended or the connection closed.
    var response: EventLoopFuture<(HTTPResponseStatus, String)> { promise.futureResult }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = head.status
        case .body(var buffer):
            let room = Self.maxBody - body.count
            if room > 0, let bytes = buffer.readBytes(length: min(room, buffer.readableBytes)) {
                body += bytes
            }
        case .end:
            complete()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        complete()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        complete()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        complete()
        context.close(promise: nil)
    }

    private func complete() {
        guard !done else { return }
        done = true
        if let status {
            let text =
                String(decoding: body, as: UTF8.self).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
            promise.succeed((status, text))
        } else {
            promise.fail(ChannelError.eof)
        }
    }
}

/// A parsed `ws://HOST[:PORT]/PATH` URL (plain `ws` only: the simulator runs on loopback).
package struct WebSocketURL: Hashable {
    package var host: String
    package var port: Int
    package var path: String

    package init(parsing url: String) throws {
        let invalid = { (why: String) in RuntimeError(.invalidAddress, "invalid tunnel URL \(url): \(why)") }
        guard url.hasPrefix("ws://") else {
            throw invalid(
                url.hasPrefix("wss://") ? "wss:// is not supported (loopback simulator)" : "must start with ws://"
            )
        }
        let rest = url.dropFirst("ws://".count)
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<slash]
        path = slash == rest.endIndex ? "/" : String(rest[slash...])
        let hostPart: Substring
        let portPart: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw invalid("unterminated [") }
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if after.isEmpty {
                portPart = nil
            } else {
                guard after.hasPrefix(":") else { throw invalid("junk after ]") }
                portPart = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            hostPart = authority[..<colon]
            portPart = authority[authority.index(after: colon)...]
        } else {
            hostPart = authority
            portPart = nil
        }
        guard !hostPart.isEmpty else { throw invalid("missing host") }
        host = String(hostPart)
        if let portPart {
            guard let value = Int(portPart), (1...65535).contains(value) else { throw invalid("bad port") }
            port = value
        } else {
            port = 80
        }
    }
}
