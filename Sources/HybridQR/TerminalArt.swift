/// Terminal rendering of a QR symbol with Unicode half blocks, and its inverse (see
/// `TerminalArtReader`).
///
/// Each character cell holds one module column and **two** module rows: `█` both rows inked,
/// `▀` upper row only, `▄` lower row only, space neither. Terminal cells are about twice as tall
/// as wide, so the modules come out roughly square.
///
/// "Inked" means drawn in the terminal's foreground colour:
/// - **normal** art inks the *dark* modules. It reads correctly on a light-background terminal
///   (dark text on white); on a dark terminal it shows a negative image, which many phone
///   scanners refuse.
/// - **inverted** art inks the *light* modules, including the quiet zone, and leaves the dark
///   modules as terminal background. On a dark-background terminal (light text on black) it shows
///   black modules on a light field, like a printed code.
public enum TerminalArt {
    /// The quiet zone printed around the symbol, in modules: **4**, as ISO/IEC 18004 requires.
    ///
    /// Two modules are often enough for a decoder when the terminal background is uniform, but
    /// a phone camera also sees the window frame, the prompt and neighbouring text; the full
    /// 4-module margin keeps those from being mistaken for part of the symbol. Vertically it
    /// costs two text lines above and below.
    public static let defaultQuietZone = 4

    /// The upper half block `▀`.
    static let upperHalf: Unicode.Scalar = "\u{2580}"
    /// The lower half block `▄`.
    static let lowerHalf: Unicode.Scalar = "\u{2584}"
    /// The full block `█`.
    static let fullBlock: Unicode.Scalar = "\u{2588}"

    /// Renders `matrix` as lines of half blocks, without a trailing newline.
    ///
    /// The quiet zone is drawn on all four sides. The symbol side (`17 + 4v`) is odd, so one
    /// extra light module row is added at the bottom to fill the last text line; every line then
    /// has the same width, `size + 2 × quietZone` characters. In normal art the light margin is
    /// spaces, so `tmux capture-pane` or an editor may trim it; `TerminalArtReader` restores it.
    ///
    /// - Parameters:
    ///   - matrix: the symbol.
    ///   - inverted: `true` for dark-background terminals (see the type's documentation).
    ///   - quietZone: margin in modules, clamped to 0 … 16; default ``defaultQuietZone``.
    public static func render(_ matrix: QRMatrix, inverted: Bool = false, quietZone: Int = defaultQuietZone) -> String {
        let margin = min(max(quietZone, 0), 16)
        let side = matrix.size + 2 * margin
        let rowCount = side + side % 2
        var lines: [String] = []
        lines.reserveCapacity(rowCount / 2)
        for top in stride(from: 0, to: rowCount, by: 2) {
            var line = String.UnicodeScalarView()
            for column in 0..<side {
                // Outside the symbol the matrix subscript answers "light", which is the quiet zone.
                let upper = matrix[column - margin, top - margin] != inverted
                let lower = matrix[column - margin, top + 1 - margin] != inverted
                switch (upper, lower) {
                case (true, true): line.append(fullBlock)
                case (true, false): line.append(upperHalf)
                case (false, true): line.append(lowerHalf)
                case (false, false): line.append(" ")
                }
            }
            lines.append(String(line))
        }
        return lines.joined(separator: "\n")
    }
}
