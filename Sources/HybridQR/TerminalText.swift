/// Decoded text made safe to show on a terminal: a QR code can hold any bytes, and escape
/// sequences written to a terminal act (OSC sets the title or the clipboard, `ESC [2J` clears the
/// screen, SGR hides text).
public enum TerminalText {
    /// `text` with every character that a terminal would act on or that reorders what is shown
    /// written as a Swift-style escape, `\u{1B}`: the C0 controls except line feed and tab, DEL,
    /// the C1 controls (U+0080 … U+009F) and the bidirectional formatting characters (U+061C,
    /// U+200E, U+200F, U+202A … U+202E, U+2066 … U+2069). Everything else is kept as it is.
    public static func escapingControls(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            if needsEscape(scalar) {
                out += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Whether a terminal would act on `scalar` or reorder text around it.
    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0A, 0x09: false
        case 0x00..<0x20, 0x7F..<0xA0: true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}
