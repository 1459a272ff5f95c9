/// Finds and decodes QR codes in files, bytes, bitmaps and captured terminal text, using libzbar.
///
/// ``scan(fileAt:)`` sniffs the content, not the file name: PNG by its signature, PGM by `P5`/`P2`,
/// otherwise UTF-8 text holding terminal art (see `TerminalArtReader`). For the `FIDO:/` check
/// and payload parsing see ``scanFIDO(fileAt:)``.
public enum QRScanner {
    /// The kinds of input ``scan(bytes:)`` recognises.
    public enum InputKind: String, Sendable, Hashable {
        /// A PNG image (any colour type; converted to grayscale).
        case png
        /// A Netpbm graymap, binary `P5` or ASCII `P2`.
        case pgm
        /// UTF-8 text containing half-block terminal art.
        case text
    }

    /// Classifies input by its first bytes, or returns `nil` for anything else (binary junk,
    /// other image formats, empty input).
    public static func sniff(_ bytes: [UInt8]) -> InputKind? {
        if bytes.starts(with: PNGCodec.signature) { return .png }
        if PGMReader.looksLikePGM(bytes) { return .pgm }
        if ForeignImage.netpbm(bytes) != nil { return nil }  // P1 and P3 are ASCII, but images
        return text(of: bytes) == nil ? nil : .text
    }

    /// The text in `bytes`: UTF-8 without NUL (UTF-16 text of ASCII is valid UTF-8 full of NULs),
    /// or UTF-16 after a byte-order mark (what Windows PowerShell 5.1's `>` writes), the mark kept
    /// as U+FEFF; `nil` for anything else. Other control bytes are what a terminal session records
    /// (a backspace echoed over a typo, the SI that `tput sgr0` writes): the art reader drops them.
    static func text(of bytes: [UInt8]) -> String? {
        guard !bytes.isEmpty else { return nil }
        if let bigEndian = utf16ByteOrder(bytes) {
            guard bytes.count % 2 == 0 else { return nil }
            let units = stride(from: 0, to: bytes.count, by: 2).map { index in
                let (high, low) = bigEndian ? (bytes[index], bytes[index + 1]) : (bytes[index + 1], bytes[index])
                return UInt16(high) << 8 | UInt16(low)
            }
            guard let text = String(validating: units, as: UTF16.self), !text.unicodeScalars.contains("\0") else { return nil }
            return text
        }
        guard !bytes.contains(0) else { return nil }
        return String(validating: bytes, as: UTF8.self)
    }

    /// Whether `bytes` starts with a UTF-32 byte-order mark: `true` big-endian (`00 00 FE FF`),
    /// `false` little-endian (`FF FE 00 00`, which also starts like UTF-16LE), `nil` no mark.
    private static func utf32ByteOrder(_ bytes: [UInt8]) -> Bool? {
        if bytes.starts(with: [0x00, 0x00, 0xFE, 0xFF]) { return true }
        if bytes.starts(with: [0xFF, 0xFE, 0x00, 0x00]) { return false }
        return nil
    }

    /// Whether `bytes` starts with a UTF-16 byte-order mark: `true` big-endian (`FE FF`), `false`
    /// little-endian (`FF FE`), `nil` no mark. Neither pair can start UTF-8 text.
    private static func utf16ByteOrder(_ bytes: [UInt8]) -> Bool? {
        if bytes.starts(with: [0xFE, 0xFF]) { return true }
        if bytes.starts(with: [0xFF, 0xFE]) { return false }
        return nil
    }

    /// Decodes the QR code in the file at `path` and returns its text (the first symbol if the
    /// image holds several; the lowest, i.e. newest, if a terminal capture does).
    ///
    /// - Throws: ``QRError/Code/fileUnreadable``, ``QRError/Code/notAnImage`` (neither PNG, PGM
    ///   nor text, or a malformed image) or ``QRError/Code/noQRCode``.
    public static func scan(fileAt path: String) throws(QRError) -> String {
        try first(of: scanAll(fileAt: path), in: path)
    }

    /// Decodes every QR code in the file at `path`; throws like ``scan(fileAt:)``, never
    /// returns an empty array.
    public static func scanAll(fileAt path: String) throws(QRError) -> [String] {
        try findings(fileAt: path).texts
    }

    /// Decodes the QR code in PNG, PGM or text bytes (for example standard input).
    ///
    /// - Throws: ``QRError/Code/notAnImage`` or ``QRError/Code/noQRCode``.
    public static func scan(bytes: [UInt8]) throws(QRError) -> String {
        try first(of: decodeAll(bytes: bytes, source: "input"), in: "input")
    }

    /// Decodes the QR code in a grayscale bitmap.
    ///
    /// - Throws: ``QRError/Code/noQRCode``.
    public static func scan(image: GrayImage) throws(QRError) -> String {
        try first(of: ZbarDecoder.decode(image), in: "\(image.width)×\(image.height) image")
    }

    /// Decodes the QR code drawn as terminal art somewhere in `text`.
    ///
    /// - Throws: ``QRError/Code/noQRCode`` if there is no art or it does not decode (for example
    ///   because lines are missing).
    public static func scan(text: String) throws(QRError) -> String {
        try first(of: decodeAll(text: text), in: "text")
    }

    // MARK: - Internals

    /// What a scan found: the decoded texts (a capture's lowest art first), the kind of input, and
    /// how many runs of terminal art below the first that decoded held no code.
    struct Findings {
        var texts: [String]
        var kind: InputKind
        var unreadableNewer = 0
    }

    /// The findings of the file at `path` (`-`: standard input); never empty.
    static func findings(fileAt path: String) throws(QRError) -> Findings {
        let bytes = try FileBytes.read(path)
        let source = path == "-" ? "standard input" : path
        if sniff(bytes) == .png, path != "-" {
            return Findings(texts: try nonEmpty(ZbarDecoder.decode(PNGCodec.read(fileAt: path)), in: source), kind: .png)
        }
        // Standard input can be read once: its bytes are decoded where they are.
        var found = try findings(bytes: bytes, source: source)
        found.texts = try nonEmpty(found.texts, in: source)
        return found
    }

    /// Dispatches on the sniffed kind and decodes; may return an empty array.
    static func decodeAll(bytes: [UInt8], source: String) throws(QRError) -> [String] {
        try findings(bytes: bytes, source: source).texts
    }

    /// ``decodeAll(bytes:source:)`` with what else was found.
    static func findings(bytes: [UInt8], source: String) throws(QRError) -> Findings {
        switch sniff(bytes) {
        case .png: return Findings(texts: try ZbarDecoder.decode(PNGCodec.decode(bytes)), kind: .png)
        case .pgm:
            let image: GrayImage
            do {
                image = try PGMReader.decode(bytes)
            } catch {
                // Name the file, as a PNG's error does.
                throw QRError(error.code, "\(source): \(error.reason)")
            }
            return Findings(texts: try ZbarDecoder.decode(image), kind: .pgm)
        case .text:
            guard let text = text(of: bytes) else { throw QRError(.notAnImage, "\(source): it is not valid text") }
            if text.prefix(512).contains("<svg") {
                throw QRError(.notAnImage, "\(source): SVG cannot be scanned; use a PNG (qr show --png)")
            }
            return try findings(text: text, source: source)
        case nil:
            let what: String
            if bytes.isEmpty {
                what = "it is empty"
            } else if let format = ForeignImage.format(of: bytes) {
                what = ForeignImage.refusal(format)
            } else if let bigEndian = utf32ByteOrder(bytes) {
                what = "it is UTF-32\(bigEndian ? "BE" : "LE") text (it starts with that byte-order mark), which is not read: "
                    + "save the capture as UTF-8 (iconv -f UTF-32 -t UTF-8)"
            } else if let bigEndian = utf16ByteOrder(bytes) {
                let mark = "it starts with a UTF-16\(bigEndian ? "BE" : "LE") byte-order mark but"
                what = bytes.count % 2 == 1
                    ? "\(mark) has an odd number of bytes (\(bytes.count)): UTF-16 text cut short in its last character; "
                        + "capture it again, or save it as UTF-8"
                    : "\(mark) is not valid UTF-16 text (a lone surrogate or a NUL): damaged, or not text"
            } else if bytes.contains(0), String(validating: bytes, as: UTF8.self) != nil {
                what = "it holds NUL bytes, as UTF-16 text without a byte-order mark does: save the capture as UTF-8 "
                    + "(iconv -f UTF-16LE -t UTF-8)"
            } else {
                what = "it is neither PNG, PGM nor UTF-8 text"
            }
            throw QRError(.notAnImage, "\(source): \(what)")
        }
    }

    /// The most runs of terminal art one capture is searched in, the newest (lowest) first: a
    /// terminal shows a few codes, and each run costs a rasterization and a zbar pass or two (a
    /// 63 MB text of 23,000 random blocks took 26 s of CPU before this bound).
    static let maximumArtRuns = 64

    /// Rasterizes terminal art and decodes every run of it that holds a symbol, the lowest run
    /// first: a capture of a terminal that showed several codes (a registration, then a sign-in)
    /// has the newest at the bottom. Each text once; at most ``maximumArtRuns`` runs.
    ///
    /// - Throws: ``QRError/Code/noQRCode`` when no run decodes, saying how many lines of art there
    ///   were and what usually cuts a code short (`source` names the input).
    static func decodeAll(text: String, source: String = "text") throws(QRError) -> [String] {
        try findings(text: text, source: source).texts
    }

    /// The fewest art lines a run must have to count as a code that could not be read (a QR
    /// symbol is at least 21 modules, 11 lines): fewer is some other use of block characters, a
    /// progress bar, not a code cut short.
    static let unreadableRunMinimumLines = 8

    /// ``decodeAll(text:source:)`` with the runs of art below the first that decoded and held no
    /// code (a newest code cut short: the older one above it is what was read).
    static func findings(text: String, source: String = "text") throws(QRError) -> Findings {
        let clean = text.hasPrefix("\u{FEFF}") ? String(text.dropFirst()) : text
        var found: [String] = []
        var unreadableNewer = 0
        let runs = try TerminalArtReader.candidatesByRunNewestFirst(in: clean)
        for run in runs.prefix(maximumArtRuns) {
            var decoded = false
            for candidate in run {
                guard let image = candidate.image() else { continue }
                let texts = try ZbarDecoder.decodeOnce(image)
                guard !texts.isEmpty else { continue }
                for text in texts where !found.contains(text) { found.append(text) }
                decoded = true
                break
            }
            if !decoded, found.isEmpty, (run.first?.grid.rows.count ?? 0) / 2 >= unreadableRunMinimumLines {
                unreadableNewer += 1
            }
        }
        guard found.isEmpty else { return Findings(texts: found, kind: .text, unreadableNewer: unreadableNewer) }
        // The reader's own art lines (two module rows each), not a second idea of what art is.
        let artLines = runs.reduce(0) { $0 + ($1.first?.grid.rows.count ?? 0) / 2 }
        throw QRError(
            .noQRCode,
            "no QR symbol could be decoded in \(source): its \(artLines) line(s) of QR art hold no complete code. Part of it may be "
                + "missing: a capture of the visible window only (tmux capture-pane -p without -S -, when the code scrolled up), "
                + "or lines a narrow terminal wrapped (tmux capture-pane -J joins them again); a desktop's --qr-png file avoids both"
                + TerminalArtReader.urlLineHint(in: TerminalArtReader.stripANSI(clean)))
    }

    /// `texts` unless it is empty, in which case ``QRError/Code/noQRCode``.
    static func nonEmpty(_ texts: [String], in source: String) throws(QRError) -> [String] {
        guard !texts.isEmpty else { throw QRError(.noQRCode, "no QR symbol could be decoded in \(source)") }
        return texts
    }

    /// The first text, or ``QRError/Code/noQRCode``.
    private static func first(of texts: [String], in source: String) throws(QRError) -> String {
        try nonEmpty(texts, in: source)[0]
    }
}
