/// Turns captured terminal text back into bitmaps a QR decoder can read.
///
/// Accepts a copy of stdout, a log file, or `tmux capture-pane -p` output (which trims trailing
/// spaces), possibly with ANSI colour codes and other lines around the art. The steps:
///
/// 1. strip ANSI escape sequences (CSI `ESC [ … final`, OSC `ESC ] … BEL|ST`, DCS/APC/PM/SOS
///    strings, two- and three-byte `ESC` sequences, C1 CSI) and carriage returns;
/// 2. classify lines (tabs expanded to 8-column stops): an *art line* holds a stretch of
///    `▀ ▄ █` and spaces with at least one block, its last such stretch; text before it (a
///    `docker compose logs` prefix, `cat -n` line numbers, a `> ` quote, a pane border) or after
///    it is not art. A line without blocks (the `FIDO:/…` line, log lines, a prompt) ends the art,
///    and so does a line wider than 1024 columns (trailing blanks trimmed first);
/// 3. group consecutive art lines whose art starts at the same column into runs; a single blank
///    line between two art lines stays in the run (it is two module rows with nothing inked),
///    longer gaps split runs;
/// 4. remove the run's common indentation and pad ragged lines to the widest with uninked cells
///    (the trailing spaces a terminal or a copy trims: light modules in normal art, dark ones in
///    inverted art without a quiet zone), then add a fresh light quiet zone;
/// 5. decide the polarity: normal art inks dark modules, inverted art inks light ones and so has
///    a border of full blocks (more than 3/4 of the border inked). Both polarities are produced,
///    the likelier one first;
/// 6. scale every module to `moduleSize` pixels (zbar needs ≥ 2; default 4).
///
/// Inverted art contains no blank lines: its quiet zone is printed as lines of `█`, which are art
/// lines, so the whole symbol including its margin forms one run.
package enum TerminalArtReader {
    /// One run of art lines, as module rows: `true` = inked.
    struct InkGrid {
        /// Width in modules.
        var width: Int
        /// Rows of inked flags; each text line gives two rows. Rows may be shorter than `width`.
        var rows: [[Bool]]
        /// The fraction of inked modules on the border; near 1 means inverted art.
        var borderInkRatio: Double
    }

    /// Rasterizes every plausible QR art block in `text`.
    ///
    /// - Parameters:
    ///   - text: the captured terminal text.
    ///   - moduleSize: pixels per module, clamped to 3 … 16.
    ///   - quietZone: light modules added around each block, clamped to 4 … 16.
    /// - Returns: bitmaps (dark modules black on white), most plausible first: for each run of
    ///   art lines, largest run first, the likelier polarity then the other.
    /// - Throws: ``QRError/Code/noQRCode`` if the text contains no line of QR art at all.
    package static func images(fromText text: String, moduleSize: Int = 4, quietZone: Int = 4) throws(QRError) -> [GrayImage] {
        try candidates(in: text).compactMap { $0.image(moduleSize: moduleSize, quietZone: quietZone) }
    }

    /// One way of reading one run of art: the grid and the polarity to assume.
    struct Candidate {
        /// The run of art lines.
        let grid: InkGrid
        /// Whether to read inked cells as light modules.
        let inverted: Bool

        /// The bitmap for this reading (see ``TerminalArtReader/images(fromText:moduleSize:quietZone:)``).
        func image(moduleSize: Int = 4, quietZone: Int = 4) -> GrayImage? {
            rasterize(grid, inverted: inverted, scale: min(max(moduleSize, 3), 16), margin: min(max(quietZone, 4), 16))
        }
    }

    /// The readings to try, most plausible first, without rasterizing them yet.
    ///
    /// - Throws: ``QRError/Code/noQRCode`` if the text contains no line of QR art at all.
    static func candidates(in text: String) throws(QRError) -> [Candidate] {
        let (grids, tooWide) = inkGrids(in: stripANSI(text))
        guard !grids.isEmpty else { throw noArt(tooWide: tooWide, hint: "") }
        return grids.sorted { $0.rows.count > $1.rows.count }.flatMap(readings(of:))
    }

    /// The readings of each run of art, runs in reverse text order (the lowest first: in a terminal
    /// capture, the newest output), each run's likelier polarity first.
    ///
    /// - Throws: ``QRError/Code/noQRCode`` if the text contains no line of QR art at all.
    static func candidatesByRunNewestFirst(in text: String) throws(QRError) -> [[Candidate]] {
        let stripped = stripANSI(text)
        let (grids, tooWide) = inkGrids(in: stripped)
        guard !grids.isEmpty else { throw noArt(tooWide: tooWide, hint: urlLineHint(in: stripped)) }
        return grids.reversed().map(readings(of:))
    }

    /// The error for text without art: no block characters at all, or (`tooWide` > 0) blocks only
    /// on lines too wide to be art, which were skipped.
    private static func noArt(tooWide: Int, hint: String) -> QRError {
        guard tooWide > 0 else {
            return QRError(.noQRCode, "the text holds no terminal QR art (no ▀ ▄ █ block characters)\(hint)")
        }
        return QRError(
            .noQRCode,
            "the text holds no terminal QR art: its \(tooWide) line(s) with ▀ ▄ █ block characters are wider than "
                + "\(maximumArtLineColumns) columns once tabs are expanded, and were skipped (the widest code with its quiet zone "
                + "is 185 columns)\(hint)")
    }

    /// Both readings of one run, the likelier polarity first: inverted art is framed by its quiet
    /// zone drawn as blocks (ratio 1); the edge of a normal symbol is roughly half dark and its last
    /// row is padding (well below 0.75).
    private static func readings(of grid: InkGrid) -> [Candidate] {
        let invertedFirst = grid.borderInkRatio > 0.75
        return [Candidate(grid: grid, inverted: invertedFirst), Candidate(grid: grid, inverted: !invertedFirst)]
    }

    /// For an error about a capture whose art cannot be read: the `FIDO:/` line a desktop prints
    /// under its code, when the capture holds one, is the same code as text.
    static func urlLineHint(in stripped: String) -> String {
        let hasURLLine = stripped.split(separator: "\n").contains { line in
            FIDOURL.hasPrefix(String(line.drop { $0 == " " || $0 == "\t" }))
        }
        guard hasURLLine else { return "" }
        return "; the capture also holds a FIDO:/ line, the same code as text (phone --qr takes it)"
    }

    /// Removes ANSI/VT escape sequences, carriage returns and the other control characters a
    /// terminal session records (a backspace echoed over a typo, the SI `tput sgr0` writes, DEL),
    /// keeping line breaks, tabs and everything printable.
    package static func stripANSI(_ text: String) -> String {
        let scalars = Array(text.unicodeScalars)
        var out = String.UnicodeScalarView()
        var index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            switch scalar.value {
            case 0x1B:
                index = skipEscape(scalars, from: index)
            case 0x9B:  // C1 CSI
                index = skipCSIBody(scalars, from: index + 1)
            case 0x0D, 0x00..<0x09, 0x0B..<0x1B, 0x1C..<0x20, 0x7F:
                index += 1
            default:
                out.append(scalar)
                index += 1
            }
        }
        return String(out)
    }

    // MARK: - Escape sequences

    /// Skips the escape sequence starting with `ESC` at `start`; returns the index after it.
    private static func skipEscape(_ s: [Unicode.Scalar], from start: Int) -> Int {
        let next = start + 1
        guard next < s.count else { return next }
        switch s[next] {
        case "[":
            return skipCSIBody(s, from: next + 1)
        case "]", "P", "_", "^", "X":
            // OSC / DCS / APC / PM / SOS: a string ended by BEL or ST (ESC \).
            var index = next + 1
            while index < s.count {
                if s[index].value == 0x07 { return index + 1 }
                if s[index].value == 0x9C { return index + 1 }
                if s[index].value == 0x1B { return min(index + 2, s.count) }
                index += 1
            }
            return index
        default:
            // ESC, intermediate bytes 0x20–0x2F, then one final byte (e.g. `ESC ( B`, `ESC 7`).
            var index = next
            while index < s.count, (0x20...0x2F).contains(s[index].value) { index += 1 }
            return min(index + 1, s.count)
        }
    }

    /// Skips CSI parameter/intermediate bytes and the final byte (0x40–0x7E).
    private static func skipCSIBody(_ s: [Unicode.Scalar], from start: Int) -> Int {
        var index = start
        while index < s.count {
            let value = s[index].value
            index += 1
            if (0x40...0x7E).contains(value) { break }
            if !(0x20...0x3F).contains(value) { break }  // malformed: stop at the odd byte
        }
        return index
    }

    // MARK: - Lines to module grids

    /// Whether `scalar` is a space-like character in art (space or no-break space).
    private static func isBlank(_ scalar: Unicode.Scalar) -> Bool { scalar == " " || scalar == "\u{00A0}" }

    /// The (upper, lower) inked halves drawn by `scalar`, or `nil` if it is not an art character.
    private static func ink(_ scalar: Unicode.Scalar) -> (Bool, Bool)? {
        switch scalar {
        case TerminalArt.fullBlock: (true, true)
        case TerminalArt.upperHalf: (true, false)
        case TerminalArt.lowerHalf: (false, true)
        default: isBlank(scalar) ? (false, false) : nil
        }
    }

    /// Whether `scalar` is one of the block characters (not a space).
    private static func isBlock(_ scalar: Unicode.Scalar) -> Bool {
        scalar == TerminalArt.fullBlock || scalar == TerminalArt.upperHalf || scalar == TerminalArt.lowerHalf
    }

    /// The widest line, in columns after tab expansion, that can hold art: the widest symbol
    /// (version 40, 177 modules) with a 4-module quiet zone on each side is 185 columns at one
    /// column per module, and a prefix (a log prefix, a line number, a pane on the left) leaves
    /// plenty of room. A wider line is skipped before its tabs are expanded, so a line of millions
    /// of tabs costs no more than its bytes.
    static let maximumArtLineColumns = 1024

    /// `line` without its trailing spaces, no-break spaces and tabs (what a terminal shows as
    /// nothing), found from the end without copying the line.
    private static func trimmingTrailingBlanks(_ line: Substring.UnicodeScalarView) -> Substring.UnicodeScalarView {
        var end = line.endIndex
        while end > line.startIndex {
            let before = line.index(before: end)
            guard isBlank(line[before]) || line[before] == "\t" else { break }
            end = before
        }
        return line[line.startIndex..<end]
    }

    /// Whether `line` with its tabs expanded (``expandingTabs(_:)``) would be wider than `limit`
    /// columns, counted without building the expanded line and stopping once past the limit.
    private static func isWider(_ line: Substring.UnicodeScalarView, than limit: Int) -> Bool {
        var columns = 0
        for scalar in line {
            columns = scalar == "\t" ? (columns / 8 + 1) * 8 : columns + 1
            if columns > limit { return true }
        }
        return false
    }

    /// The line with its tabs expanded to spaces up to the next multiple of 8 columns, as a
    /// terminal shows them (an indented paste, `cat -n`'s tab after the line number).
    private static func expandingTabs(_ line: Substring.UnicodeScalarView) -> [Unicode.Scalar] {
        var out: [Unicode.Scalar] = []
        for scalar in line {
            if scalar == "\t" {
                repeat { out.append(" ") } while out.count % 8 != 0
            } else {
                out.append(scalar)
            }
        }
        return out
    }

    /// The art in a line: its last stretch of art characters that holds a block, and the column
    /// the stretch starts at; `nil` if the line has no block character.
    ///
    /// A whole art line starts at column 0. Text before the art (a `docker compose logs` prefix
    /// `desktop-1  | `, a line number, a mail quote `> `, a tmux pane border `│`) moves the start
    /// to just after it; text after the art (the border of a pane to its right) is left out.
    private static func artStretch(of line: [Unicode.Scalar]) -> (column: Int, cells: ArraySlice<Unicode.Scalar>)? {
        var end = line.count
        while end > 0 {
            var start = end
            while start > 0, ink(line[start - 1]) != nil { start -= 1 }
            if line[start..<end].contains(where: isBlock) { return (start, line[start..<end]) }
            end = start - 1  // before the character that is not art
        }
        return nil
    }

    /// Splits clean text into runs of art lines and converts each run into an ``InkGrid``.
    ///
    /// Consecutive lines belong to one run when their art starts at the same column (a common
    /// prefix such as `desktop-1  | ` or a right-aligned line number is dropped with it). A line
    /// wider than ``maximumArtLineColumns`` is not art: it ends a run like a text line, and
    /// `tooWide` counts those of them that hold a block character.
    static func inkGrids(in text: String) -> (grids: [InkGrid], tooWide: Int) {
        var tooWide = 0
        var runs: [[[Unicode.Scalar]]] = []
        var current: [[Unicode.Scalar]] = []
        var currentColumn = 0
        var pendingBlanks = 0
        func closeRun() {
            if !current.isEmpty { runs.append(current) }
            current = []
            pendingBlanks = 0
        }
        for rawLine in text.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = trimmingTrailingBlanks(rawLine)
            if isWider(trimmed, than: maximumArtLineColumns) {
                if trimmed.contains(where: isBlock) { tooWide += 1 }
                closeRun()
                continue
            }
            var line = expandingTabs(trimmed)
            while let last = line.last, isBlank(last) { line.removeLast() }
            if line.isEmpty {
                pendingBlanks += 1
                if pendingBlanks > 1 { closeRun() }
                continue
            }
            guard let art = artStretch(of: line) else {
                closeRun()
                continue
            }
            if art.column != currentColumn { closeRun() }
            if !current.isEmpty {
                current.append(contentsOf: Array(repeating: [], count: pendingBlanks))
            }
            pendingBlanks = 0
            currentColumn = art.column
            current.append(Array(art.cells))
        }
        closeRun()
        return (runs.map(grid(from:)), tooWide)
    }

    /// Converts one run of art lines into module rows, dropping the common indentation.
    private static func grid(from lines: [[Unicode.Scalar]]) -> InkGrid {
        let indent = lines.filter { !$0.isEmpty }
            .map { line in line.prefix(while: isBlank).count }
            .min() ?? 0
        var rows: [[Bool]] = []
        var width = 0
        for line in lines {
            let cells = line.dropFirst(min(indent, line.count)).map { ink($0) ?? (false, false) }
            width = max(width, cells.count)
            rows.append(cells.map(\.0))
            rows.append(cells.map(\.1))
        }
        return InkGrid(width: width, rows: rows, borderInkRatio: borderInkRatio(rows: rows, width: width))
    }

    /// The share of inked modules on the grid's outer ring (missing cells count as not inked).
    private static func borderInkRatio(rows: [[Bool]], width: Int) -> Double {
        guard width > 0, !rows.isEmpty else { return 0 }
        func at(_ x: Int, _ y: Int) -> Bool { x < rows[y].count && rows[y][x] }
        var inked = 0
        var total = 0
        for x in 0..<width {
            inked += (at(x, 0) ? 1 : 0) + (at(x, rows.count - 1) ? 1 : 0)
            total += 2
        }
        for y in 0..<rows.count {
            inked += (at(0, y) ? 1 : 0) + (at(width - 1, y) ? 1 : 0)
            total += 2
        }
        return Double(inked) / Double(total)
    }

    /// Draws a grid as a bitmap: dark modules black, padding and quiet zone white.
    private static func rasterize(_ grid: InkGrid, inverted: Bool, scale: Int, margin: Int) -> GrayImage? {
        let columns = grid.width + 2 * margin
        let rowCount = grid.rows.count + 2 * margin
        let width = columns * scale
        let height = rowCount * scale
        guard width > 0, height > 0, width <= GrayImage.maximumPixelCount / height else { return nil }
        var pixels = [UInt8](repeating: 255, count: width * height)
        pixels.withUnsafeMutableBufferPointer { buffer in
            for (y, row) in grid.rows.enumerated() {
                // Cells beyond the end of a line were trailing spaces, trimmed by the terminal or a
                // copy: not inked, so light in normal art but dark in inverted art (whose quiet
                // zone is blocks: without one, its right finder pattern ends in spaces).
                for x in 0..<grid.width where (x < row.count && row[x]) != inverted {
                    GrayImage.fillSquare(buffer, stride: width, left: (x + margin) * scale, top: (y + margin) * scale, side: scale)
                }
            }
        }
        return GrayImage(unchecked: width, height, pixels)
    }
}
