import HybridRuntime
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

/// A misbehaving tunnel service for client tests: upgrades every request with the headers it is
/// told to send, then optionally sends one frame. Or it accepts TCP and never answers.
final class FakeTunnelServer: Sendable {
    /// What the fake does with a connection.
    enum Behaviour: Sendable {
        /// Accept the TCP connection and never answer.
        case silent
        /// Upgrade with these extra 101 headers, then send `frame` (opcode, payload) if given.
        case upgrade(headers: [(String, String)], frame: (WebSocketOpcode, [UInt8])?)
    }

    private let channel: Channel

    /// The bound port.
    let port: Int

    private init(channel: Channel) {
        self.channel = channel
        self.port = channel.localAddress?.port ?? 0
    }

    static func start(_ behaviour: Behaviour) async throws -> FakeTunnelServer {
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard case .upgrade(let headers, let frame) = behaviour else { return }
                    let upgrader = NIOTypedWebSocketServerUpgrader<Bool>(
                        shouldUpgrade: { channel, _ in
                            channel.eventLoop.makeSucceededFuture(HTTPHeaders(headers))
                        },
                        upgradePipelineHandler: { channel, _ in
                            if let (opcode, payload) = frame {
                                let buffer = channel.allocator.buffer(bytes: payload)
                                channel.writeAndFlush(
                                    WebSocketFrame(fin: true, opcode: opcode, data: buffer),
                                    promise: nil
                                )
                            }
                            return channel.eventLoop.makeSucceededFuture(true)
                        }
                    )
                    _ = try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(
                        configuration: .init(
                            upgradeConfiguration: .init(
                                upgraders: [upgrader],
                                notUpgradingCompletionHandler: { channel in channel.eventLoop.makeSucceededFuture(false)
                                }
                            )
                        )
                    )
                }
            }
        let channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        return FakeTunnelServer(channel: channel)
    }

    func stop() async {
        try? await channel.close().get()
    }
}
