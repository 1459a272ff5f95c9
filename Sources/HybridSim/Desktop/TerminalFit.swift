import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Whether the terminal the desktop draws its QR code on can show it: wide enough for the art's
/// lines (a narrower one wraps them, and nothing can scan the code), and in a UTF-8 locale (a
/// terminal that follows a Latin-1 locale shows the block characters as other characters).
/// Checked only when standard output is a terminal: a pipe or a file is read by a program, not
/// looked at.
enum TerminalFit {
    /// The notes for standard output, if it is a terminal.
    static func notes(artWidth: Int, environment: [String: String]) -> [String] {
        guard isatty(STDOUT_FILENO) == 1 else { return [] }
        var size = winsize()
        let columns = ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0 && size.ws_col > 0 ? Int(size.ws_col) : nil
        return notes(columns: columns, artWidth: artWidth, environment: environment)
    }

    /// The notes for a terminal of `columns` (`nil`: unknown) in the locale of `environment`.
    static func notes(columns: Int?, artWidth: Int, environment: [String: String]) -> [String] {
        var notes: [String] = []
        if let columns, columns < artWidth {
            notes.append(
                "the terminal is \(columns) columns wide and the QR code needs \(artWidth): its lines wrap and it cannot be "
                    + "scanned; widen the terminal, or scan the PNG (--qr-png FILE) or use the FIDO:/ line (phone --qr)")
        }
        if let (name, value) = nonUTF8Locale(environment) {
            notes.append(
                "the locale (\(name)=\(value)) is not UTF-8: a terminal that follows it shows the QR code's block characters "
                    + "as other characters; use a UTF-8 locale, or scan the PNG (--qr-png FILE) or use the FIDO:/ line (phone --qr)")
        }
        return notes
    }

    /// The locale variable that decides the character set (`LC_ALL`, else `LC_CTYPE`, else
    /// `LANG`), when it names one that is not UTF-8. `C` and `POSIX` are left alone: they are the
    /// default of containers and CI machines whose terminals are UTF-8 all the same.
    static func nonUTF8Locale(_ environment: [String: String]) -> (String, String)? {
        for name in ["LC_ALL", "LC_CTYPE", "LANG"] {
            guard let value = environment[name], !value.isEmpty else { continue }
            let base = value.split(separator: "@").first.map(String.init) ?? value
            if base == "C" || base == "POSIX" { return nil }
            let lowered = value.lowercased()
            return lowered.contains("utf-8") || lowered.contains("utf8") ? nil : (name, value)
        }
        return nil
    }
}
