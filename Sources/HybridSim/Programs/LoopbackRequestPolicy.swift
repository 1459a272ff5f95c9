import NIOHTTP1

/// Which requests the loopback HTTP servers (`hybrid-sim rp`, `desktop --web`, `demo --web`)
/// answer: those a local program or the server's own page sends, not those a web page of another
/// site makes a browser send.
///
/// - **Host** (RFC 9112 §3.2): an HTTP/1.1 request without `Host`, or any with more than one, is
///   400; one that does not name this server (`127.0.0.1`, `localhost` or `[::1]` with its port) is
///   421 Misdirected Request, and so is an absolute-form target naming another authority or another
///   scheme than `http` (`https://…`, `ftp://…`; §3.2.2).
/// - **Target** (RFC 9112 §3.2): a path (`/…`), `*`, or `http://` this server. One starting `//` (a
///   URL parser reads `//host/path` as another host's path) or holding a fragment (`#…`, which a
///   client never sends) is 400, and so is any other form. Paths are matched as sent, not
///   percent-decoded: `/a%2Db` is not `/a-b`.
///   A page whose site name was rebound to 127.0.0.1 (DNS rebinding) sends its own name, so it is
///   refused before it can read or change anything.
/// - **Cross-site** (the Fetch standard's `Origin` and `Sec-Fetch-Site`): a request whose `Origin`
///   is not this server (two `Origin` fields: 400), or that a browser marks as coming from anywhere
///   but this server's own pages (`Sec-Fetch-Site` other than `same-origin`, or `none` for what the
///   user typed), is 403. Browsers send such requests without asking first when they are "simple"
///   (a form post, a `text/plain` body, an image's `GET`, which carries no `Origin`), so another
///   page, even one on another port of this machine (`same-site`), could otherwise start ceremonies
///   or issue challenges here. Programs (`curl`, `desktop --rp-url`) send neither field.
///
/// These checks stop browsers, not the local programs of other users of the machine: the `--web`
/// pages also require their secret path (``WebPageToken``), checked after these.
package enum LoopbackRequestPolicy {
    /// Why the request with `head` is refused, as a status and a one-line reason; `nil` when it is
    /// answered. `port`: the port the server listens on.
    package static func refusal(_ head: HTTPRequestHead, port: Int) -> (status: Int, reason: String)? {
        let hosts = head.headers["Host"]
        if hosts.isEmpty, head.version == .http1_1 {
            return (400, "an HTTP/1.1 request needs a Host header")
        }
        if hosts.count > 1 {
            return (400, "more than one Host header (RFC 9112 §3.2)")
        }
        if let host = hosts.first, !acceptsHost(host, port: port) {
            return (421, "misdirected request: Host must be 127.0.0.1:\(port), localhost:\(port) or [::1]:\(port)")
        }
        if let refusal = targetRefusal(head.uri, port: port) { return refusal }
        let origins = head.headers["Origin"]
        if origins.count > 1 {
            return (400, "more than one Origin header")
        }
        if let origin = origins.first, !acceptsOrigin(origin, port: port) {
            return (403, "cross-origin request refused: Origin \(origin) is not this server (http://127.0.0.1:\(port))")
        }
        if let site = head.headers["Sec-Fetch-Site"].first, !["same-origin", "none"].contains(site.lowercased()) {
            return (403, "request from another site's page refused (Sec-Fetch-Site: \(site)): only this server's own pages may use it")
        }
        return nil
    }

    /// Whether a `Host` header names this server: `127.0.0.1`, `localhost` or `[::1]` (any case)
    /// with `:port`, or without a port when `port` is 80 (RFC 9110, section 7.2).
    package static func acceptsHost(_ host: String, port: Int) -> Bool {
        authorities(port: port).contains(host.lowercased())
    }

    /// Why the request target `uri` is refused (see the type's description), or `nil`.
    static func targetRefusal(_ uri: String, port: Int) -> (status: Int, reason: String)? {
        if uri.contains("#") {
            return (400, "the request target has a fragment (#…), which a client does not send (RFC 9112 §3.2)")
        }
        if uri.hasPrefix("//") {
            return (400, "the request target starts with //, which reads as another host's path: send the path alone (/…)")
        }
        if uri.hasPrefix("/") || uri == "*" { return nil }
        if let authority = originForm(uri).authority {
            guard acceptsHost(authority, port: port) else {
                return (421, "misdirected request: the target must name 127.0.0.1:\(port), localhost:\(port) or [::1]:\(port)")
            }
            return nil
        }
        if let colon = uri.firstIndex(of: ":"), let first = uri.first, first.isASCII, first.isLetter,
            uri[..<colon].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) })
        {
            return (421, "misdirected request: the target is a \(uri[..<colon].lowercased()): URL; this server is http://127.0.0.1:\(port)")
        }
        return (400, "the request target must be a path (/…) or an http:// URL of this server (RFC 9112 §3.2)")
    }

    /// A request target in origin form (`/path?query`) and, for an absolute-form one
    /// (`http://host:port/path`, RFC 9112 §3.2.2), the authority it named.
    package static func originForm(_ uri: String) -> (target: String, authority: String?) {
        guard uri.lowercased().hasPrefix("http://") else { return (uri, nil) }
        let rest = uri.dropFirst("http://".count)
        guard let slash = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) else { return ("/", String(rest)) }
        let target = rest[slash...]
        return (target.hasPrefix("/") ? String(target) : "/" + target, String(rest[..<slash]))
    }

    /// Whether an `Origin` is this server: `http://` and one of its authorities.
    static func acceptsOrigin(_ origin: String, port: Int) -> Bool {
        let lowered = origin.lowercased()
        return authorities(port: port).contains { "http://\($0)" == lowered }
    }

    private static func authorities(port: Int) -> [String] {
        let names = ["127.0.0.1", "localhost", "[::1]"]
        return names.map { "\($0):\(port)" } + (port == 80 ? names : [])
    }
}
