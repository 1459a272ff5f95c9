import NIOHTTP1

/// Which browser origins may open or join tunnels (`hybrid-sim relay --allow-origin`).
///
/// Native caBLE clients send either no `Origin` header or the tunnel service's own URL as origin:
/// Chromium passes `url::Origin::Create` of the `wss://` tunnel URL (`device/fido/cable/
/// websocket_adapter.cc`), webauthn-rs sends `wss://{host}`, and this project's client
/// `ws://HOST:PORT`. A web page's WebSocket always carries the page's origin, which is `http(s)://…`
/// (or `null`), never `ws(s)://`. So a request without `Origin`, or with a `ws://`/`wss://` origin,
/// is allowed; any other origin is a web page, and without this policy any page open in a local
/// browser could fill the tunnel table of a relay on the fixed default port: it is refused with 403
/// unless listed. Comparison is exact after lower-casing (`scheme://host[:port]`); `*` allows every
/// origin.
public struct RelayOriginPolicy: Sendable, Hashable {
    /// The allowed origins, lower-cased (`*`: any).
    public var allowedOrigins: Set<String>

    /// A policy allowing `allowedOrigins` besides requests without an `Origin` header and
    /// `ws://`/`wss://` origins.
    public init(allowedOrigins: Set<String> = []) {
        self.allowedOrigins = Set(allowedOrigins.map { $0.lowercased() })
    }

    /// The default: no web page origin is allowed.
    public static let refuseBrowsers = RelayOriginPolicy()

    /// `nil` when the request may proceed, otherwise why it is refused.
    func check(_ headers: HTTPHeaders) -> String? {
        let origins = headers["Origin"]
        guard !origins.isEmpty else { return nil }
        guard origins.count == 1, let origin = origins.first else { return "more than one Origin header" }
        let lowered = origin.lowercased()
        if lowered.hasPrefix("ws://") || lowered.hasPrefix("wss://") { return nil }
        if allowedOrigins.contains("*") || allowedOrigins.contains(lowered) { return nil }
        return "Origin \(PeerText.loggable(origin)) is not allowed (browser origins are refused unless allowed with --allow-origin)"
    }
}
