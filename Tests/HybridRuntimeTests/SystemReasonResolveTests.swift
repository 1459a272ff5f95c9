import HybridRuntime
import NIOCore
import Testing

/// A name that does not resolve is told in words ("the host name X could not be resolved (…)"),
/// not as NIO's `SocketAddressError.UnknownHost: … (error -2) for host …` dump.
@Suite("RuntimeError.systemReason: name resolution")
struct SystemReasonResolveTests {
    @Test("SocketAddressError.UnknownHost names the host and the resolver's reason")
    func unknownHost() throws {
        // RFC 6761: .invalid never resolves, with or without a network.
        let error = #expect(throws: SocketAddressError.UnknownHost.self) {
            _ = try SocketAddress.makeAddressResolvingHost("no-such-host.invalid", port: 1)
        }
        let reason = RuntimeError.systemReason(try #require(error))
        #expect(reason.hasPrefix("the host name no-such-host.invalid could not be resolved ("), "\(reason)")
        #expect(!reason.contains("SocketAddressError"), "\(reason)")
        #expect(!reason.contains("(error -"), "\(reason)")
    }
}
