import CTAP2
import HybridCore

// The runtime's words for the tunnel service (the paths themselves are HybridCore's `TunnelServicePath`).

extension TunnelServicePath {
    /// "/cable/new", "/cable/connect", "/cable/contact", "/cable/listen" or the path itself, for error messages.
    static func endpointName(of path: String) -> String {
        for name in ["new", "connect", "contact", "listen"] where path.hasPrefix("/cable/\(name)/") {
            return "/cable/\(name)"
        }
        return path.count > 40 ? String(path.prefix(40)) + "…" : path
    }

    /// What a status means on this service, when the relay gave no explanation.
    static func explain(status: Int, endpoint: String) -> String? {
        let connecting = endpoint.hasPrefix("/cable/connect")
        switch status {
        case 400: return "bad request: \(HybridConstants.webSocketProtocol) subprotocol missing or not a WebSocket upgrade"
        case 404 where connecting: return "unknown tunnel or routing ID"
        case 404: return "the server has no caBLE tunnel service at \(endpoint)"
        case 409 where connecting: return "tunnel already joined"
        case 409 where endpoint.hasPrefix("/cable/new"): return "tunnel ID already open"
        case 409 where endpoint.hasPrefix("/cable/contact"): return "the linked phone is busy with another desktop"
        case 410 where endpoint.hasPrefix("/cable/contact") || endpoint.hasPrefix("/cable/listen"): return "contact ID unknown or revoked"
        case 504: return "the linked phone is not listening"
        case 503: return "relay busy or shutting down"
        default: return nil
        }
    }

    /// What a gateway's HTML answer (nginx's or HAProxy's 502, 503 or 504 page) means: a proxy in
    /// front of the relay that could not get the relay's answer; `nil` for any other status.
    static func explainGateway(status: Int) -> String? {
        switch status {
        case 502: return "a proxy in front of the relay could not reach the relay behind it"
        case 503: return "a proxy in front of the relay has no relay to send this to"
        case 504: return "a proxy in front of the relay got no answer from the relay behind it in time"
        default: return nil
        }
    }

    /// An HTML answer to the upgrade of `endpoint` that is no gateway's: what answered (the status
    /// line and the page's `<title>`, e.g. Python's `http.server` "Error response", nginx's "400 The
    /// plain HTTP request was sent to HTTPS port") and that it is no tunnel service, which answers
    /// 101 or refuses in plain text; a proxy is named as one possibility, not as the answer.
    static func notATunnelService(endpoint: String, statusLine: String, page: String) -> String {
        let title = htmlTitle(page).map { " titled \"\($0)\"" } ?? ""
        return "the server answered \(endpoint) with \(statusLine) and an HTML page\(title): not a caBLE tunnel service, "
            + "which answers 101 (switching to WebSocket) or refuses in plain text; is the relay URL right? "
            + "(another web server listens there, or a proxy in front of the relay answered itself)"
    }

    /// The text of `page`'s `<title>` (any case), its white space collapsed, escaped and at most
    /// 120 characters (``PeerText/printable(_:limit:)``); `nil` when there is none or it is empty.
    static func htmlTitle(_ page: String) -> String? {
        let lower = page.lowercased()
        guard let open = lower.range(of: "<title"), let tagEnd = lower[open.upperBound...].firstIndex(of: ">") else { return nil }
        let start = lower.index(after: tagEnd)
        let end = lower[start...].range(of: "</title")?.lowerBound ?? lower.endIndex
        // `lowercased()` can change lengths outside ASCII: cut the original at the same offsets.
        guard lower.count == page.count else { return nil }
        let from = page.index(page.startIndex, offsetBy: lower.distance(from: lower.startIndex, to: start))
        let to = page.index(page.startIndex, offsetBy: lower.distance(from: lower.startIndex, to: end))
        let words = page[from..<to].split(whereSeparator: \.isWhitespace).joined(separator: " ")
        return words.isEmpty ? nil : PeerText.printable(words, limit: 120)
    }
}

extension TunnelServicePath {
    /// A request target as the relay may log it: without its query, every path segment longer than
    /// 8 characters cut to its first 4 and its length (`/cable/connect/6EFA0A/0011…(32)`). Routing
    /// IDs (6 hex digits) stay whole; tunnel and contact IDs, which let whoever reads them join a
    /// tunnel or push to a phone, are never logged in full, and a length shows an ID written another way.
    static func redactedTarget(_ target: some StringProtocol) -> String {
        let path = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).map { segment in
            segment.count > 8 ? "\(segment.prefix(4))…(\(segment.count))" : String(segment)
        }
        return segments.joined(separator: "/") + (path.count < target.count ? "?…" : "")
    }
}

extension Hex {
    /// "ABCD…": the first 4 hex digits of a tunnel or contact ID, the only part of it ever logged.
    static func redactedPrefix(_ bytes: [UInt8]) -> String {
        encode(bytes.prefix(2), uppercase: true) + "…"
    }
}
