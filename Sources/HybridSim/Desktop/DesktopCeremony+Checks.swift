import HybridRuntime
import NIOCore

extension DesktopCeremony {
    /// Whether `host` (as an origin serializes it, an IPv6 address with or without its brackets)
    /// is an IP address, read as the socket layer reads one (`inet_pton`, through SwiftNIO).
    static func isIPAddress(_ host: String) -> Bool {
        (try? SocketAddress(ipAddress: LoopbackAddress.unbracketed(host), port: 0)) != nil
    }
}
