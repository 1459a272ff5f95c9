import NIOCore

extension SocketAddress {
    /// `host:port` of a proximity socket: an IP address literal (`127.0.0.1`, `::1`) is parsed in
    /// place; only a name (`localhost`) goes through the system resolver, whose `getaddrinfo` opens
    /// and queries a netlink socket on Linux (three of those per sign-in were measurable in
    /// `hybrid-sim bench`).
    static func proximity(host: String, port: Int) throws -> SocketAddress {
        if let address = try? SocketAddress(ipAddress: host, port: port) { return address }
        return try SocketAddress.makeAddressResolvingHost(host, port: port)
    }
}
