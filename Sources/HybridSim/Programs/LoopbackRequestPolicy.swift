import NIOHTTP1

/// Which requests the loopback HTTP servers (`hybrid-sim rp`, `desktop --web`, `demo --web`)
/// answer: those a local program or the server's own page sends, not those a web page of another
/// site makes a browser send.
///
/// - **Host** (RFC 9112 §3.2): more than one `Host` field is 400; one that does not name this
///   server (`127.0.0.1`, `localhost` or `[::1]` with its port) is 421 Misdirected Request. A page
///   whose site name was rebound to 127.0.0.1 (DNS rebinding) sends its own name, so it is refused
///   before it can read or change anything.
/// - **Cross-site** (the Fetch standard's `Origin` and `Sec-Fetch-Site`): a request whose `Origin`
///   is neither this server nor an origin the server names (the relying party's own), or that a
///   browser marks `Sec-Fetch-Site: cross-site`, is 403. Browsers send such requests without asking
///   first when they are "simple" (a form post, a `text/plain` body, an image's `GET`), so another
///   site's page could otherwise start ceremonies or issue challenges here. Programs (`curl`,
///   `desktop --rp-url`) send neither field and are not affected.
package enum LoopbackRequestPolicy {
    /// Why `headers` are refused, as a status and a one-line reason; `nil` when they are answered.
    /// `allowedOrigins`: origins besides this server's own that may call it.
    package static func refusal(_ headers: HTTPHeaders, port: Int, allowedOrigins: [String] = []) -> (status: Int, reason: String)? {
        let hosts = headers["Host"]
        if hosts.count > 1 {
            return (400, "more than one Host header (RFC 9112 §3.2)")
        }
        if let host = hosts.first, !acceptsHost(host, port: port) {
            return (421, "misdirected request: Host must be 127.0.0.1:\(port), localhost:\(port) or [::1]:\(port)")
        }
        if let origin = headers.first(name: "Origin"), !acceptsOrigin(origin, port: port, allowed: allowedOrigins) {
            let others = allowedOrigins.isEmpty ? "" : " or \(allowedOrigins.joined(separator: ", "))"
            return (403, "cross-origin request refused: Origin \(origin) is not this server (http://127.0.0.1:\(port))\(others)")
        }
        if headers["Sec-Fetch-Site"].contains(where: { $0.lowercased() == "cross-site" }) {
            return (403, "cross-site request refused (Sec-Fetch-Site: cross-site): another site's page cannot use this server")
        }
        return nil
    }

    /// Whether a `Host` header names this server: `127.0.0.1`, `localhost` or `[::1]` (any case)
    /// with `:port`, or without a port when `port` is 80 (RFC 9110, section 7.2).
    package static func acceptsHost(_ host: String, port: Int) -> Bool {
        authorities(port: port).contains(host.lowercased())
    }

    /// Whether an `Origin` is this server (`http://` and one of its authorities) or one of `allowed`.
    static func acceptsOrigin(_ origin: String, port: Int, allowed: [String]) -> Bool {
        let lowered = origin.lowercased()
        if allowed.contains(where: { $0.lowercased() == lowered }) { return true }
        return authorities(port: port).contains { "http://\($0)" == lowered }
    }

    private static func authorities(port: Int) -> [String] {
        let names = ["127.0.0.1", "localhost", "[::1]"]
        return names.map { "\($0):\(port)" } + (port == 80 ? names : [])
    }
}
