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
package enum TerminalFit {
    /// The notes for standard output, if it is a terminal. `pngPath`: the PNG file written beside
    /// the art, named as the way around; else `pngFlag`, the flag that writes one.
    package static func notes(
        artWidth: Int, environment: [String: String], pngPath: String? = nil, pngFlag: String = "--qr-png"
    ) -> [String] {
        guard isatty(STDOUT_FILENO) == 1 else { return [] }
        var size = winsize()
        let columns = ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0 && size.ws_col > 0 ? Int(size.ws_col) : nil
        return notes(columns: columns, artWidth: artWidth, environment: environment, pngPath: pngPath, pngFlag: pngFlag)
    }

    /// The notes for a terminal of `columns` (`nil`: unknown) in the locale of `environment`.
    static func notes(
        columns: Int?, artWidth: Int, environment: [String: String], pngPath: String? = nil, pngFlag: String = "--qr-png"
    ) -> [String] {
        let around = "scan the PNG (" + (pngPath.map { "phone --scan \(Run.shellWord($0))" } ?? "\(pngFlag) FILE")
            + ") or use the FIDO:/ line (phone --qr)"
        var notes: [String] = []
        if let columns, columns < artWidth {
            notes.append(
                "the terminal is \(columns) columns wide and the QR code needs \(artWidth): its lines wrap and it cannot be "
                    + "scanned; widen the terminal, or \(around)")
        }
        if let (name, value) = nonUTF8Locale(environment) {
            notes.append(
                "the locale (\(name)=\(value)) is not UTF-8: a terminal that follows it shows the QR code's block characters "
                    + "as other characters; use a UTF-8 locale, or \(around)")
        } else if environment["TMUX"] != nil, !hasUTF8Locale(environment) {
            let locale = localeVariable(environment).map { "\($0.0)=\($0.1)" } ?? "no LANG, LC_CTYPE or LC_ALL"
            notes.append(
                "tmux in a locale that is not UTF-8 (\(locale)) draws the QR code's block characters as _ unless it was "
                    + "started with -u or from a shell in a UTF-8 locale; if the code shows as _, start tmux with -u or in a UTF-8 locale "
                    + "(LANG=C.UTF-8), or \(around)")
        }
        return notes
    }

    /// The locale variable that decides the character set (`LC_ALL`, else `LC_CTYPE`, else
    /// `LANG`) and its value, if one is set.
    static func localeVariable(_ environment: [String: String]) -> (String, String)? {
        for name in ["LC_ALL", "LC_CTYPE", "LANG"] {
            if let value = environment[name], !value.isEmpty { return (name, value) }
        }
        return nil
    }

    /// Whether the deciding locale variable names UTF-8.
    static func hasUTF8Locale(_ environment: [String: String]) -> Bool {
        guard let (_, value) = localeVariable(environment) else { return false }
        let lowered = value.lowercased()
        return lowered.contains("utf-8") || lowered.contains("utf8")
    }

    /// The locale variable that decides the character set, when it names one that is not UTF-8.
    /// `C` and `POSIX` (and no locale at all) are left alone: they are the default of containers
    /// and CI machines whose terminals are UTF-8 all the same; only tmux, which draws what it
    /// takes for other characters as `_` in them, is told about (``notes(columns:artWidth:environment:pngPath:)``).
    static func nonUTF8Locale(_ environment: [String: String]) -> (String, String)? {
        guard let (name, value) = localeVariable(environment), !hasUTF8Locale(environment) else { return nil }
        let base = value.split(separator: "@").first.map(String.init) ?? value
        return base == "C" || base == "POSIX" ? nil : (name, value)
    }
}
