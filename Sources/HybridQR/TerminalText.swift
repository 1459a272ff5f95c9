import HybridCore

/// Decoded text made safe to show on a terminal: a QR code can hold any bytes, and escape
/// sequences written to a terminal act (OSC sets the title or the clipboard, `ESC [2J` clears the
/// screen, SGR hides text).
public enum TerminalText {
    /// `text` with every character that a terminal would act on, that breaks a line or that
    /// reorders what is shown written as a Swift-style escape, `\u{1B}`: the characters peer text
    /// is escaped for everywhere (`Unicode.Scalar.isHiddenInPeerText`: the C0 controls, DEL, the
    /// C1 controls U+0080 … U+009F, U+2028 and U+2029, the bidirectional formatting characters
    /// U+061C, U+200E, U+200F, U+202A … U+202E, U+2066 … U+2069) except line feed and tab, and a
    /// backslash as `\\`, so that a code holding the six characters `\u{1B}` does not look like an
    /// escaped ESC. Everything else is kept as it is.
    public static func escapingControls(_ text: String) -> String {
        HiddenCharacters.escaped(text, keeping: ["\n", "\t"], escapingBackslash: true)
    }
}
