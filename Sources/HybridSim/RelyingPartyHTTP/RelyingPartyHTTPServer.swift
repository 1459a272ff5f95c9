import Foundation
import HybridRuntime
import NIOCore
import NIOHTTP1
import NIOPosix

/// `hybrid-sim rp`'s HTTP/1.1 listener (SwiftNIO): hands each complete request to a
/// ``RelyingPartyService`` and writes its JSON answer, one request per connection
/// (`Connection: close`). Bodies over 1 MiB are answered with 413.
public final class RelyingPartyHTTPServer: Sendable {
    /// The largest request body accepted.
    public static let maximumBodyBytes = 1 << 20

    private let service: RelyingPartyService
    private let channel: any Channel

    private init(service: RelyingPartyService, channel: any Channel) {
        self.service = service
        self.channel = channel
    }

    /// The bound port.
    public var port: Int { channel.localAddress?.port ?? 0 }

    /// Binds `host:port` (0: a free port) and starts serving.
    ///
    /// - Throws: ``ProgramFailure`` `network` when the port cannot be bound.
    public static func start(service: RelyingPartyService, host: String = "127.0.0.1", port: Int) async throws(ProgramFailure) -> RelyingPartyHTTPServer {
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(RequestHandler(service: service))
                }
            }
        do {
            let channel = try await bootstrap.bind(host: host, port: port).get()
            return RelyingPartyHTTPServer(service: service, channel: channel)
        } catch {
            throw ProgramFailure(.network, "cannot listen on \(host):\(port): \(RuntimeError.systemReason(error))")
        }
    }

    /// Stops listening.
    public func stop() async {
        try? await channel.close().get()
    }

    /// Completes when the listener closes.
    public func waitUntilClosed() async {
        try? await channel.closeFuture.get()
    }
}

/// Collects one request and answers it.
private final class RequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let service: RelyingPartyService
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false

    init(service: RelyingPartyService) {
        self.service = service
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
            tooLarge = false
        case .body(let buffer):
            if body.count + buffer.readableBytes > RelyingPartyHTTPServer.maximumBodyBytes {
                tooLarge = true
            } else {
                body += buffer.readableBytesView
            }
        case .end:
            guard let head else { return }
            self.head = nil
            if tooLarge {
                write(context: context, RelyingPartyHTTPResponse.error(413, "the body is larger than 1 MiB"))
                return
            }
            var headers: [String: String] = [:]
            for (name, value) in head.headers { headers[name.lowercased()] = value }
            let request = RelyingPartyHTTPRequest(method: head.method.rawValue, target: head.uri, headers: headers, body: body)
            let service = self.service
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            Task {
                let response = await service.handle(request)
                bound.eventLoop.execute {
                    let (handler, context) = bound.value
                    handler.write(context: context, response)
                }
            }
        }
    }

    private func write(context: ChannelHandlerContext, _ response: RelyingPartyHTTPResponse) {
        let bytes = response.body.data
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: String(bytes.count))
        headers.add(name: "Connection", value: "close")
        for (name, value) in response.headers { headers.add(name: name, value: value) }
        let status = HTTPResponseStatus(statusCode: response.status)
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: bytes)))), promise: nil)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in bound.value.close(promise: nil) }
    }
}
