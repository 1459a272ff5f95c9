@testable import HybridSim
import Testing

/// The desktop's notes when its terminal cannot show the QR code (a terminal-environments review:
/// a 40-column pane wrapped the 45-column art, a Latin-1 terminal showed its blocks as `â`, and
/// nothing said why the code could not be scanned).
@Suite("Desktop: a terminal that cannot show the QR code")
struct TerminalFitTests {
    @Test("narrower than the art: a note with both widths; as wide or unknown: none")
    func width() {
        let narrow = TerminalFit.notes(columns: 40, artWidth: 45, environment: [:])
        #expect(narrow == [
            "the terminal is 40 columns wide and the QR code needs 45: its lines wrap and it cannot be scanned; widen the "
                + "terminal, or scan the PNG (--qr-png FILE) or use the FIDO:/ line (phone --qr)"
        ])
        #expect(TerminalFit.notes(columns: 45, artWidth: 45, environment: [:]).isEmpty)
        #expect(TerminalFit.notes(columns: nil, artWidth: 45, environment: [:]).isEmpty)
        // With --qr-png, the note names the file to scan.
        #expect(TerminalFit.notes(columns: 40, artWidth: 45, environment: [:], pngPath: "/tmp/my code.png").first?
            .hasSuffix("widen the terminal, or scan the PNG (phone --scan '/tmp/my code.png') or use the FIDO:/ line (phone --qr)") == true)
    }

    @Test("in tmux, a locale that is not UTF-8, C or none among them, is named: tmux draws the blocks as _", arguments: [
        (["TMUX": "/tmp/tmux-0/default,1,0"], "no LANG, LC_CTYPE or LC_ALL"),
        (["TMUX": "/tmp/tmux-0/default,1,0", "LANG": "C"], "LANG=C"),
        (["TMUX": "/tmp/tmux-0/default,1,0", "LC_ALL": "POSIX", "LANG": "en_US.UTF-8"], "LC_ALL=POSIX"),
        (["TMUX": "/tmp/tmux-0/default,1,0", "LANG": "C.UTF-8"], nil),
        (["LANG": "C"], nil),
    ])
    func tmuxLocale(environment: [String: String], named: String?) {
        let notes = TerminalFit.notes(columns: 200, artWidth: 45, environment: environment)
        if let named {
            #expect(notes == [
                "tmux in a locale that is not UTF-8 (\(named)) draws the QR code's block characters as _ unless it was started "
                    + "with -u or from a shell in a UTF-8 locale; if the code shows as _, start tmux with -u or in a UTF-8 locale (LANG=C.UTF-8), "
                    + "or scan the PNG (--qr-png FILE) or use the FIDO:/ line (phone --qr)"
            ])
        } else {
            #expect(notes.isEmpty, "\(notes)")
        }
    }

    @Test("a locale that is not UTF-8 is named (LC_ALL before LC_CTYPE before LANG); UTF-8 ones, C and POSIX are not", arguments: [
        (["LANG": "de_DE.ISO-8859-1"], "LANG=de_DE.ISO-8859-1"),
        (["LANG": "en_US.UTF-8", "LC_ALL": "fr_FR"], "LC_ALL=fr_FR"),
        (["LC_CTYPE": "pt_BR.ISO8859-1@euro", "LANG": "en_US.UTF-8"], "LC_CTYPE=pt_BR.ISO8859-1@euro"),
        (["LANG": "en_US.UTF-8"], nil),
        (["LC_ALL": "C.utf8"], nil),
        (["LC_ALL": "C"], nil),
        (["LANG": "POSIX"], nil),
        ([:], nil),
    ])
    func locale(environment: [String: String], named: String?) {
        let notes = TerminalFit.notes(columns: 200, artWidth: 45, environment: environment)
        if let named {
            #expect(notes == [
                "the locale (\(named)) is not UTF-8: a terminal that follows it shows the QR code's block characters as other "
                    + "characters; use a UTF-8 locale, or scan the PNG (--qr-png FILE) or use the FIDO:/ line (phone --qr)"
            ])
        } else {
            #expect(notes.isEmpty, "\(notes)")
        }
    }
}
