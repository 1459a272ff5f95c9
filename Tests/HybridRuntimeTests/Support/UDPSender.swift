import NIOCore
import NIOPosix

/// Sends raw datagrams to a loopback port (for scanner tests that need malformed datagrams).
final class UDPSender: Sendable {
    private let channel: Channel

    private init(channel: Channel) {
        self.channel = channel
    }

    static func make() async throws -> UDPSender {
        let channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return UDPSender(channel: channel)
    }

    func send(_ bytes: [UInt8], to port: Int) async throws {
        let address = try SocketAddress(ipAddress: "127.0.0.1", port: port)
        let envelope = AddressedEnvelope(remoteAddress: address, data: channel.allocator.buffer(bytes: bytes))
        try await channel.writeAndFlush(envelope).get()
    }

    func close() async {
        try? await channel.close().get()
    }
}
