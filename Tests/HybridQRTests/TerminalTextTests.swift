import HybridQR
import Testing

/// `qr scan --raw` on a terminal: the controls a hostile code holds are shown, not obeyed.
@Suite("Terminal-safe text")
struct TerminalTextTests {
    @Test("OSC, SGR, ESC [2J, CR, BEL, C1 CSI and a bidi override are escaped; text, line feeds and tabs are kept")
    func escapes() {
        let hostile = "title\u{1B}]0;pwned\u{07}\u{1B}[8mhidden\u{1B}[2J\r\u{9B}31m\u{202E}txt.exe"
        #expect(TerminalText.escapingControls(hostile)
            == "title\\u{1B}]0;pwned\\u{7}\\u{1B}[8mhidden\\u{1B}[2J\\u{D}\\u{9B}31m\\u{202E}txt.exe")
        #expect(TerminalText.escapingControls("FIDO:/123\nline 2\tcolumn é ü 日本") == "FIDO:/123\nline 2\tcolumn é ü 日本")
        #expect(TerminalText.escapingControls("\u{0}\u{7F}") == "\\u{0}\\u{7F}")
    }

    @Test("line and paragraph separators, NEL and the other C1 controls are escaped, and a backslash is doubled so a literal \\u{1B} is not taken for an escaped ESC")
    func separatorsAndBackslash() {
        #expect(TerminalText.escapingControls("a\u{2028}b\u{2029}c\u{85}d\u{9C}") == "a\\u{2028}b\\u{2029}c\\u{85}d\\u{9C}")
        #expect(TerminalText.escapingControls("literal \\u{1B} then \u{1B}") == "literal \\\\u{1B} then \\u{1B}")
    }

    @Test("an error quoting a code that is not FIDO:/ escapes its C1, bidi and separator characters and its backslashes")
    func previewEscaped() {
        let error = #expect(throws: QRError(.notFIDOURL)) { try QRScanner.fido(from: ["x\u{9B}31m\u{202E}\u{2028}\u{85}\\"]) }
        #expect(error?.reason == "the code holds \"x\\u{9B}31m\\u{202E}\\u{2028}\\u{85}\\\\\"", "\(String(describing: error))")
    }
}
