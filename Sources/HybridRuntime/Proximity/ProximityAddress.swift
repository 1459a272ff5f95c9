import NIOCore

extension SocketAddress {
    /// `host:port` of a proximity socket: an IP address literal (`127.0.0.1`, `::1`) is parsed in
    /// place; only a name (`localhost`) goes through the system resolver, whose `getaddrinfo` opens
    /// and queries a netlink socket on Linux (three of those per sign-in were measurable in
    /// `hybrid-sim bench`). `localhost` is 127.0.0.1 without asking the resolver: the address
    /// every scanner here binds, where Debian's `/etc/hosts` lists `::1 localhost` first (a
    /// phone sending to `::1` would miss a scanner on 127.0.0.1, and the other way round).
    static func proximity(host: String, port: Int) throws -> SocketAddress {
        if host.lowercased() == "localhost" { return try SocketAddress(ipAddress: "127.0.0.1", port: port) }
        if let address = try? SocketAddress(ipAddress: host, port: port) { return address }
        return try SocketAddress.makeAddressResolvingHost(host, port: port)
    }
}
