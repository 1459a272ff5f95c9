import HybridRuntime
import NIOCore
import NIOPosix
import Testing

/// The probe the desktop uses to say a `--relay` refuses connections: every address the host
/// resolves to must refuse (a client tries them all), so `localhost`, which most hosts resolve
/// to `::1` first, is not called down while a relay listens on 127.0.0.1.
@Suite("BindConflict: is anything listening")
struct BindConflictTests {
    @Test("a listener on 127.0.0.1 is found by its address and by localhost; a closed port refuses on both")
    func probe() async throws {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(server.localAddress?.port)
        #expect(!BindConflict.refusesConnections(host: "127.0.0.1", port: port))
        #expect(!BindConflict.refusesConnections(host: "localhost", port: port))
        try await server.close()
        #expect(BindConflict.refusesConnections(host: "127.0.0.1", port: port))
        #expect(BindConflict.refusesConnections(host: "localhost", port: port))
    }
}

@Suite("LoopbackAddress")
struct LoopbackAddressTests {
    @Test("localhost in any case, ::1 (bracketed too) and 127.0.0.0/8 are loopback; other names and addresses are not")
    func loopback() {
        for host in ["localhost", "LOCALHOST", "LocalHost", "::1", "[::1]", "127.0.0.1", "127.255.0.9"] {
            #expect(LoopbackAddress.isLoopback(host), "\(host)")
        }
        for host in ["example.com", "10.0.0.1", "128.0.0.1", "127.0.0", "127.0.0.256", "localhost.example", "::2", "[::2]", "[::1"] {
            #expect(!LoopbackAddress.isLoopback(host), "\(host)")
        }
        #expect(LoopbackAddress.unbracketed("[::1]") == "::1" && LoopbackAddress.unbracketed("::1") == "::1")
    }
}
