import CTAP2
import HybridCore

/// The secret in a `--web` page's address, `http://127.0.0.1:PORT/s/TOKEN/` (Docs/CLI.md, "--web"):
/// only whoever started the program sees it (it is printed on that program's stderr), and the
/// server answers nothing of the ceremony without it.
///
/// Loopback is shared by every user of the machine, and the `Host`, `Origin` and `Sec-Fetch-Site`
/// checks (``LoopbackRequestPolicy``) stop browsers, not local programs: without the token another
/// user's `curl http://127.0.0.1:PORT/events` read the `FIDO:/` URL (the QR secret) and the relay
/// and proximity addresses, and his own phone could then finish the ceremony in the user's place.
///
/// The token is a path segment, not a query parameter or a cookie: the page names its stream and
/// QR code relatively (`events`, `qr.svg`), so they carry the token with no script and the page
/// stays static text; the server matches one segment instead of parsing a query (repeated names,
/// percent-encoding); and a cookie is scoped to the host, not the port, so a browser would send it
/// to every other server on 127.0.0.1 too.
package struct WebPageToken: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The token's length in bytes: 192 bits from the system's secure generator.
    package static let size = 24
    /// The length of its unpadded base64url spelling.
    package static let encodedLength = (size * 4 + 2) / 3

    /// The token as unpadded base64url (``encodedLength`` characters of `A–Z a–z 0–9 - _`, none of
    /// which a URL escapes).
    package let text: String

    /// A fresh token from `random` (``RandomSource/system`` for anything real).
    package init(random: RandomSource = .system) {
        text = Base64URL.encode(random.bytes(Self.size))
    }

    /// The page's path, `/s/TOKEN/`; its stream and QR code are `events` and `qr.svg` below it.
    package var path: String { "/s/\(text)/" }

    /// Names the token's kind only: the secret itself is never printed this way (logs, errors).
    package var description: String { "WebPageToken(\(Self.encodedLength) characters)" }

    /// As ``description``.
    package var debugDescription: String { description }

    /// What a request for `path` (a target's path, its query removed) may see.
    package enum Access: Equatable, Sendable {
        /// The path below the token: `/` (the page), `/events`, `/qr.svg`, …; empty for `/s/TOKEN`
        /// without its final `/` (redirected to the page, whose relative links need it).
        case resource(Substring)
        /// No token, or the wrong one: 403 with this one-line reason.
        case refused(String)
    }

    /// Checks `path` for the token, comparing it in constant time (the time taken does not say how
    /// much of a guess was right; only whether its length was, and the length is public).
    package func access(_ path: String) -> Access {
        let advice = "open the address the program printed on stderr (web page: http://127.0.0.1:PORT/s/TOKEN/)"
        guard path.hasPrefix("/s/") else {
            return .refused("this page needs its token in the path: \(advice)")
        }
        let rest = path.utf8.dropFirst(3)
        let end = rest.firstIndex(of: UInt8(ascii: "/")) ?? rest.endIndex
        guard constantTimeEqual(Array(rest[..<end]), Array(text.utf8)) else {
            return .refused("not this page's token: \(advice)")
        }
        return .resource(path[end...])
    }
}
