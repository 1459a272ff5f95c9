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
        guard !bytes.isEmpty, String(validating: bytes, as: UTF8.self) != nil else { return nil }
        // Text may hold tabs, newlines and terminal escapes (ESC, BEL), but no other C0 controls.
        let allowed: Set<UInt8> = [0x07, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1B]
        return bytes.contains { ($0 < 0x20 && !allowed.contains($0)) || $0 == 0x7F } ? nil : .text
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
        let bytes = try FileBytes.read(path)
        let source = path == "-" ? "standard input" : path
        if sniff(bytes) == .png, path != "-" {
            return try nonEmpty(ZbarDecoder.decode(PNGCodec.read(fileAt: path)), in: source)
        }
        // Standard input can be read once: its bytes are decoded where they are.
        return try nonEmpty(decodeAll(bytes: bytes, source: source), in: source)
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

    /// Dispatches on the sniffed kind and decodes; may return an empty array.
    static func decodeAll(bytes: [UInt8], source: String) throws(QRError) -> [String] {
        switch sniff(bytes) {
        case .png: return try ZbarDecoder.decode(PNGCodec.decode(bytes))
        case .pgm:
            let image: GrayImage
            do {
                image = try PGMReader.decode(bytes)
            } catch {
                // Name the file, as a PNG's error does.
                throw QRError(error.code, "\(source): \(error.reason)")
            }
            return try ZbarDecoder.decode(image)
        case .text:
            let text = String(decoding: bytes, as: UTF8.self)
            if text.prefix(512).contains("<svg") {
                throw QRError(.notAnImage, "\(source): SVG cannot be scanned; use a PNG (qr show --png)")
            }
            return try decodeAll(text: text, source: source)
        case nil:
            let what = bytes.isEmpty ? "it is empty" : "it is neither PNG, PGM nor UTF-8 text"
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
        let clean = text.hasPrefix("\u{FEFF}") ? String(text.dropFirst()) : text
        var found: [String] = []
        let runs = try TerminalArtReader.candidatesByRunNewestFirst(in: clean)
        for run in runs.prefix(maximumArtRuns) {
            for candidate in run {
                guard let image = candidate.image() else { continue }
                let texts = try ZbarDecoder.decodeOnce(image)
                guard !texts.isEmpty else { continue }
                for text in texts where !found.contains(text) { found.append(text) }
                break
            }
        }
        guard found.isEmpty else { return found }
        // The reader's own art lines (two module rows each), not a second idea of what art is.
        let artLines = runs.reduce(0) { $0 + ($1.first?.grid.rows.count ?? 0) / 2 }
        throw QRError(
            .noQRCode,
            "no QR symbol could be decoded in \(source): its \(artLines) line(s) of QR art hold no complete code. Part of it may be "
                + "missing: a capture of the visible window only (tmux capture-pane -p without -S -, when the code scrolled up), "
                + "or lines a narrow terminal wrapped; a desktop's --qr-png file avoids both")
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
