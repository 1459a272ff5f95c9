@testable import HybridRuntime
import Testing

/// `HOST:PORT` as a Host header and a report write it: an IPv6 address in brackets, shared by the
/// tunnel client and the load generator (`bench relay --url 'ws://[::1]:P'` sent `Host: ::1:P`,
/// which a proxy answers 400).
@Suite("Host authority: IPv6 in brackets")
struct HostAuthorityTests {
    @Test("an IPv6 address is bracketed once; IPv4 and names are not")
    func authority() {
        #expect(WebSocketURL.authority(host: "::1", port: 47001) == "[::1]:47001")
        #expect(WebSocketURL.authority(host: "[::1]", port: 47001) == "[::1]:47001")
        #expect(WebSocketURL.authority(host: "127.0.0.1", port: 47001) == "127.0.0.1:47001")
        #expect(WebSocketURL.authority(host: "localhost", port: 80) == "localhost:80")
    }

    @Test("bench relay's report names an IPv6 relay as [::1]:P")
    func reportAddress() throws {
        let target = try WebSocketURL(parsing: "ws://[::1]:47001")
        let report = RelayLoadReport(configuration: .init(host: target.host, port: target.port, tunnels: 1, rounds: 1))
        #expect(report.relayAddress == "[::1]:47001")
    }
}
