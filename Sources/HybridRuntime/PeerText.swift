/// Text a peer chose (a close reason, a header value, a response body), made safe to put into a
/// message line.
///
/// A relay or a peer could otherwise end a program's one `error: …` line early with a line break
/// and forge a second one, or send terminal escape sequences that repaint the user's screen. Every
/// C0 and C1 control character (line breaks, escape, delete), the Unicode line and paragraph
/// separators and the bidirectional overrides that can reorder what a reader sees are written as
/// `\u{XX}`; everything else stays as it came. Long text is cut at `limit` characters with "…".
package enum PeerText {
    /// The longest peer text a message quotes, in characters.
    package static let defaultLimit = 200

    /// `text` with every character that could break or disguise a line escaped, cut at `limit`.
    package static func printable(_ text: some StringProtocol, limit: Int = defaultLimit) -> String {
        var result = ""
        var count = 0
        for scalar in text.unicodeScalars {
            if count == limit {
                result += "…"
                break
            }
            if isHidden(scalar) {
                result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                result.unicodeScalars.append(scalar)
            }
            count += 1
        }
        return result
    }

    /// Whether `scalar` is a control character, a line or paragraph separator, or a bidirectional
    /// formatting character.
    static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: return true  // C0, DEL, C1
        case 0x2028, 0x2029: return true  // line and paragraph separators
        case 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x061C: return true  // bidi marks, embeddings, overrides, isolates
        default: return false
        }
    }
}
