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
    /// Installs the upgrade handler (``ClientUpgradeHandler``) on a fresh connection; on a 101 it
    /// installs NIO's WebSocket frame decoder, encoder and aggregator and a ``ClientFrameHandler``.
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
        let authority = WebSocketURL.authority(host: host, port: port)
        var headers = [("Host", authority), ("Origin", options.origin ?? "ws://\(authority)")]
        if options.offersSubprotocol {
            headers.append(("Sec-WebSocket-Protocol", HybridConstants.webSocketProtocol))
        }
        headers += options.extraHeaders
        headers.append(("Content-Length", "0"))
        let upgrade = ClientUpgradeHandler(path: path, headers: headers, promise: channel.eventLoop.makePromise()) { channel, head in
            let handler = ClientFrameHandler(
                inbox: inbox,
                eventLoop: channel.eventLoop,
                maxMessageSize: maxMessage,
                closeTimeout: closeTimeout
            )
            try channel.pipeline.syncOperations.addHandlers(
                ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: maxMessage)),
                WebSocketFrameEncoder(),
                ServerFrameCheck(),
                NIOWebSocketFrameAggregator(
                    minNonFinalFragmentSize: 0,
                    maxAccumulatedFrameCount: MessageAssembler.maxFragments,
                    maxAccumulatedFrameSize: maxMessage
                ),
                handler
            )
            return .upgraded(head, NIOLoopBound(handler, eventLoop: channel.eventLoop))
        }
        try channel.pipeline.syncOperations.addHandler(upgrade)
        return PendingUpgrade(channel: channel, outcome: upgrade.outcome)
    }
}

/// A parsed `ws://HOST[:PORT]/PATH` URL (plain `ws` only: the simulator runs on loopback).
package struct WebSocketURL: Hashable {
    package var host: String
    package var port: Int
    package var path: String

    /// `HOST:PORT` as a URL's authority and a `Host` header write it: an IPv6 address in brackets
    /// (`[::1]:47001`; `::1:47001` is no authority, and a proxy answers it 400).
    package static func authority(host: String, port: Int) -> String {
        host.contains(":") && !host.hasPrefix("[") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

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
