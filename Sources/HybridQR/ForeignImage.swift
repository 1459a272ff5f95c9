/// Image formats HybridSim does not read, named by their first bytes so that a refusal can say
/// what the file is and how to convert it.
enum ForeignImage {
    /// A format recognised by its magic bytes.
    struct Format: Equatable {
        /// The name used in messages, e.g. `"a JPEG image"`.
        let name: String
        /// The usual file name extension, for the conversion hint.
        let fileExtension: String
    }

    /// The format of `bytes`, or `nil` if it is none of the recognised ones.
    static func format(of bytes: [UInt8]) -> Format? {
        func starts(_ text: String, at offset: Int = 0) -> Bool {
            bytes.count >= offset + text.utf8.count && bytes[offset..<(offset + text.utf8.count)].elementsEqual(text.utf8)
        }
        if bytes.starts(with: [0xFF, 0xD8, 0xFF]) { return Format(name: "a JPEG image", fileExtension: "jpg") }
        if starts("GIF87a") || starts("GIF89a") { return Format(name: "a GIF image", fileExtension: "gif") }
        if starts("BM"), bytes.count >= 26 { return Format(name: "a BMP image", fileExtension: "bmp") }
        if starts("RIFF"), starts("WEBP", at: 8) { return Format(name: "a WebP image", fileExtension: "webp") }
        if bytes.starts(with: [0x49, 0x49, 0x2A, 0x00]) || bytes.starts(with: [0x4D, 0x4D, 0x00, 0x2A]) {
            return Format(name: "a TIFF image", fileExtension: "tiff")
        }
        if starts("ftyp", at: 4) { return isoMedia(brand: bytes.count >= 12 ? Array(bytes[8..<12]) : []) }
        return netpbm(bytes)
    }

    /// The refusal for a file of `format`: what it is, what is read, how to convert it.
    static func refusal(_ format: Format) -> String {
        "this is \(format.name); HybridSim reads PNG, PGM or terminal text: convert it, "
            + "e.g. `convert in.\(format.fileExtension) out.png` (ImageMagick)"
    }

    /// An ISO base media file (`ftyp` box) by its major brand: HEIC, AVIF or another.
    private static func isoMedia(brand: [UInt8]) -> Format {
        let name = String(decoding: brand, as: UTF8.self)
        if ["heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1"].contains(name) {
            return Format(name: "a HEIC (HEIF) image", fileExtension: "heic")
        }
        if ["avif", "avis"].contains(name) { return Format(name: "an AVIF image", fileExtension: "avif") }
        return Format(name: "an ISO media file (ftyp), not an image HybridSim reads", fileExtension: "heic")
    }

    /// Netpbm files other than a graymap (`P5`/`P2`, which are read): bitmaps, pixmaps and PAM.
    /// `P1` and `P3` are ASCII, so a file is only called one when its whole header parses (the
    /// magic, then width, height and, but for a bitmap, a maxval of 1 … 65535, each after
    /// whitespace or `#` comments, and whitespace after the last; an ASCII file's first sample
    /// next): a log line `P1 2024-11-27 …` is text. `P7` needs a line break after the magic.
    static func netpbm(_ bytes: [UInt8]) -> Format? {
        guard bytes.count >= 3, bytes[0] == UInt8(ascii: "P") else { return nil }
        let kinds: [UInt8: Format] = [
            UInt8(ascii: "1"): Format(name: "an ASCII PBM bitmap (P1)", fileExtension: "pbm"),
            UInt8(ascii: "4"): Format(name: "a PBM bitmap (P4)", fileExtension: "pbm"),
            UInt8(ascii: "3"): Format(name: "an ASCII PPM colour image (P3)", fileExtension: "ppm"),
            UInt8(ascii: "6"): Format(name: "a PPM colour image (P6)", fileExtension: "ppm"),
            UInt8(ascii: "7"): Format(name: "a PAM image (P7)", fileExtension: "pam"),
        ]
        guard let format = kinds[bytes[1]] else { return nil }
        if bytes[1] == UInt8(ascii: "7") { return bytes[2] == 0x0A ? format : nil }
        let bitmap = bytes[1] == UInt8(ascii: "1") || bytes[1] == UInt8(ascii: "4")
        var cursor = 2
        guard let width = headerNumber(bytes, &cursor), width > 0, let height = headerNumber(bytes, &cursor), height > 0 else {
            return nil
        }
        if !bitmap {
            guard let maxval = headerNumber(bytes, &cursor), (1...65_535).contains(maxval) else { return nil }
        }
        guard cursor < bytes.count, PGMReader.isSpace(bytes[cursor]) else { return nil }
        let ascii = bytes[1] == UInt8(ascii: "1") || bytes[1] == UInt8(ascii: "3")
        if ascii {
            var sample = cursor
            guard headerNumber(bytes, &sample) != nil else { return nil }
        }
        return format
    }

    /// The decimal number at `cursor` after whitespace and `#` comments (at least one of them
    /// before it), moving `cursor` past it; `nil` if there is none, or it is too large for a
    /// header (the PGM reader's rule, ``PGMReader/nextHeaderNumber(_:_:)``).
    private static func headerNumber(_ bytes: [UInt8], _ cursor: inout Int) -> Int? {
        let number = PGMReader.nextHeaderNumber(bytes, &cursor)
        guard number.separated, number.digits > 0, number.value <= PGMReader.largestHeaderNumber else { return nil }
        return number.value
    }
}
