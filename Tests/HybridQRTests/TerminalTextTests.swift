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
}
