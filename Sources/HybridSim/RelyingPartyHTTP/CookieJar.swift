import Foundation

/// The cookies a relying party set during one run, kept and sent back as a browser does (RFC 6265
/// §5.3, §5.4): `Max-Age` and `Expires` end a cookie (one in the past deletes it), `Path` limits
/// where it goes (by default the directory of the URL that set it), and `Domain` must cover the
/// host that set it (a cookie for another domain is dropped), so a server whose cookie a browser
/// would not send back fails here too. `Secure`, `SameSite` and `HttpOnly` do not change what a
/// same-site `fetch` from the relying party's own page sends, and are not checked.
struct CookieJar: Sendable {
    struct Cookie: Sendable, Equatable {
        var name: String
        var value: String
        /// The host (host-only) or the `Domain` attribute's domain, lower case.
        var domain: String
        var hostOnly: Bool
        var path: String
        var expires: Date?
    }

    private(set) var cookies: [Cookie] = []

    /// Takes one `Set-Cookie` header value a response to `url` carried.
    mutating func store(_ header: String, from url: URLComponents, now: Date = Date()) {
        let parts = header.split(separator: ";", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard let pair = parts.first, let equals = pair.firstIndex(of: "=") else { return }
        let name = pair[..<equals].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty else { return }
        let host = (url.host ?? "").lowercased()
        var cookie = Cookie(
            name: name, value: pair[pair.index(after: equals)...].trimmingCharacters(in: .whitespaces), domain: host,
            hostOnly: true, path: Self.defaultPath(url.path), expires: nil)
        var maxAge: Int?
        for attribute in parts.dropFirst() {
            let (key, value) = Self.split(attribute)
            switch key {
            case "max-age":
                if let seconds = Int(value) { maxAge = seconds }
            case "expires":
                if let date = Self.httpDate(value) { cookie.expires = date }
            case "domain":
                let domain = (value.hasPrefix(".") ? String(value.dropFirst()) : value).lowercased()
                guard !domain.isEmpty else { continue }
                // A domain that does not cover the host that set it: the browser drops the cookie.
                guard host == domain || host.hasSuffix("." + domain) else { return }
                cookie.domain = domain
                cookie.hostOnly = false
            case "path":
                if value.hasPrefix("/") { cookie.path = value }
            default:
                continue
            }
        }
        // Max-Age wins over Expires (§5.3 step 3); zero or less ends the cookie now.
        if let maxAge { cookie.expires = maxAge <= 0 ? Date.distantPast : now.addingTimeInterval(TimeInterval(maxAge)) }
        cookies.removeAll { $0.name == cookie.name && $0.domain == cookie.domain && $0.path == cookie.path }
        if let expires = cookie.expires, expires <= now { return }
        cookies.append(cookie)
    }

    /// The `Cookie` header for a request to `url`, or `nil` when no cookie goes there.
    func header(for url: URLComponents, now: Date = Date()) -> String? {
        let host = (url.host ?? "").lowercased()
        let path = url.path.isEmpty ? "/" : url.path
        let sent = cookies.filter { cookie in
            (cookie.expires.map { $0 > now } ?? true)
                && (cookie.hostOnly ? host == cookie.domain : host == cookie.domain || host.hasSuffix("." + cookie.domain))
                && Self.pathMatches(path, cookie.path)
        }
        guard !sent.isEmpty else { return nil }
        // Longer paths first (§5.4 step 2), then by name for a stable header.
        return sent.sorted { ($0.path.count, $1.name) > ($1.path.count, $0.name) }.map { "\($0.name)=\($0.value)" }
            .joined(separator: "; ")
    }

    /// The default path of a cookie set by a response to `path` (§5.1.4): up to its last `/`.
    static func defaultPath(_ path: String) -> String {
        guard path.hasPrefix("/"), let last = path.lastIndex(of: "/"), last != path.startIndex else { return "/" }
        return String(path[..<last])
    }

    /// Whether a request to `requestPath` gets a cookie of `cookiePath` (§5.1.4 path-match).
    static func pathMatches(_ requestPath: String, _ cookiePath: String) -> Bool {
        if requestPath == cookiePath { return true }
        guard requestPath.hasPrefix(cookiePath) else { return false }
        return cookiePath.hasSuffix("/") || requestPath.dropFirst(cookiePath.count).first == "/"
    }

    private static func split(_ attribute: String) -> (String, String) {
        guard let equals = attribute.firstIndex(of: "=") else { return (attribute.lowercased(), "") }
        return (
            attribute[..<equals].trimmingCharacters(in: .whitespaces).lowercased(),
            attribute[attribute.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        )
    }

    /// An `Expires` date in the forms servers send (RFC 1123, RFC 850, asctime; dashes or spaces).
    static func httpDate(_ text: String) -> Date? {
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy", "EEE, dd-MMM-yyyy HH:mm:ss zzz"] {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }
}
