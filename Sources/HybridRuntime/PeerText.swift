import CTAP2
import HybridCore

/// Text a peer chose (a close reason, a header value, a response body, an `Origin`), made safe to
/// put into a message line (``printable(_:limit:)``) or a log line (``loggable(_:)``).
///
/// A relay or a peer could otherwise end a program's one `error: …` line early with a line break
/// and forge a second one, forge log lines, or send terminal escape sequences that repaint the
/// user's screen. Escaped characters are written as `\u{XX}`, and long text is cut with "…".
package enum PeerText {
    /// The longest peer text a message or log line quotes, in characters.
    package static let defaultLimit = 200
    /// The limit for a whole progress line that quotes peer text among its own.
    package static let lineLimit = 4096

    /// `text` for a log line: only printable ASCII stays; quotes and backslashes are escaped with a
    /// backslash, every other character as `\u{XX}`, so a log line stays one parseable line
    /// whatever the peer sent. At most ``defaultLimit`` characters of `text`, then "…".
    package static func loggable(_ text: String) -> String {
        HiddenCharacters.replacing(text, limit: defaultLimit) { scalar in
            switch scalar {
            case "\\": return "\\\\"
            case "\"": return "\\\""
            case " "..."~": return nil
            default: return scalar.swiftEscape
            }
        }
    }

    /// `text` for a message line: every character that could break or disguise the line is escaped
    /// as `\u{XX}`; everything else stays. At most `limit` characters of `text`, then "…".
    ///
    /// It is idempotent (`printable(printable(t)) == printable(t)` within the limit): a message
    /// escaped where the peer's text entered it (a close reason in `RuntimeError.closed`) is escaped
    /// again, unchanged, where a whole line is printed (the narrators). That is why a backslash stays
    /// as it is: escaping it too would double every escape made at the source.
    package static func printable(_ text: some StringProtocol, limit: Int = defaultLimit) -> String {
        HiddenCharacters.escaped(text, escapingBackslash: false, limit: limit)
    }

    /// Bytes a peer sent that need not be text (the start of an answer that is not HTTP, a header
    /// line): printable ASCII as it is, any other byte as `\xNN` (decoded as UTF-8, binary would
    /// show as U+FFFD). At most `limit` bytes, then "…".
    package static func printable(bytes: some Collection<UInt8>, limit: Int) -> String {
        bytes.prefix(limit).map { byte in
            (0x20..<0x7F).contains(byte) && byte != UInt8(ascii: "\\") ? String(UnicodeScalar(byte)) : "\\x" + Hex.encode([byte], uppercase: true)
        }.joined() + (bytes.count > limit ? "…" : "")
    }
}
