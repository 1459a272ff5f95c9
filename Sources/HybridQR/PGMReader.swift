/// Parses Netpbm graymaps: binary `P5` and ASCII `P2`, 8- or 16-bit.
///
/// Header fields are separated by whitespace and may be interleaved with `#` comments. Samples
/// are scaled to 0 … 255 using the file's `maxval`. Only the first image of a multi-image file
/// is read.
package enum PGMReader {
    /// Whether `bytes` starts like a PGM file (`P5` or `P2` followed by whitespace or, as
    /// Netpbm allows, straight away by a `#` comment).
    package static func looksLikePGM(_ bytes: [UInt8]) -> Bool {
        bytes.count >= 3 && bytes[0] == UInt8(ascii: "P") && (bytes[1] == UInt8(ascii: "5") || bytes[1] == UInt8(ascii: "2"))
            && (isSpace(bytes[2]) || bytes[2] == UInt8(ascii: "#"))
    }

    /// Decodes a PGM image.
    ///
    /// - Throws: ``QRError/Code/notAnImage`` naming the first problem (bad magic, header field,
    ///   maxval, truncated raster, bad sample).
    package static func decode(_ bytes: [UInt8]) throws(QRError) -> GrayImage {
        guard looksLikePGM(bytes) else { throw QRError(.notAnImage, "PGM: the file does not start with P5 or P2") }
        let ascii = bytes[1] == UInt8(ascii: "2")
        var cursor = 2
        let width = try headerNumber(bytes, &cursor, "width")
        let height = try headerNumber(bytes, &cursor, "height")
        let maxval = try headerNumber(bytes, &cursor, "maxval")
        guard (1...65_535).contains(maxval) else { throw QRError(.notAnImage, "PGM: maxval \(maxval) is outside 1…65535") }
        if let refusal = GrayImage.sizeRefusal(width: width, height: height) { throw QRError(.notAnImage, "PGM: \(refusal)") }
        let count = width * height
        var pixels = [UInt8]()
        pixels.reserveCapacity(count)
        if ascii {
            for index in 0..<count {
                let sample = try headerNumber(bytes, &cursor, "sample \(index)")
                guard sample <= maxval else { throw QRError(.notAnImage, "PGM: sample \(index) exceeds maxval") }
                pixels.append(scale(sample, maxval))
            }
        } else {
            // Exactly one whitespace byte separates maxval from the raster.
            cursor += 1
            let sampleSize = maxval < 256 ? 1 : 2
            guard cursor <= bytes.count, bytes.count - cursor >= count * sampleSize else {
                throw QRError(.notAnImage, "PGM: raster truncated (need \(count * sampleSize) bytes)")
            }
            for index in 0..<count {
                let at = cursor + index * sampleSize
                let sample = sampleSize == 1 ? Int(bytes[at]) : Int(bytes[at]) << 8 | Int(bytes[at + 1])
                pixels.append(scale(min(sample, maxval), maxval))
            }
        }
        return try GrayImage(width: width, height: height, pixels: pixels)
    }

    /// Maps a sample in 0 … maxval to 0 … 255, rounding to nearest.
    private static func scale(_ sample: Int, _ maxval: Int) -> UInt8 {
        UInt8((sample * 255 + maxval / 2) / maxval)
    }

    /// Netpbm whitespace: space, tab, CR, LF, VT, FF.
    static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || (0x09...0x0D).contains(byte)
    }

    /// The largest header number read (2^30).
    static let largestHeaderNumber = 1 << 30

    /// A Netpbm header's next decimal number (any header: ``ForeignImage`` names other Netpbm
    /// formats with it): whitespace and `#` comments are skipped, then its digits are read, up to
    /// the first that takes it past ``largestHeaderNumber``. `separated`: something was skipped
    /// before it; `digits`: 0 when there is no number at `cursor`.
    static func nextHeaderNumber(_ bytes: [UInt8], _ cursor: inout Int) -> (value: Int, digits: Int, separated: Bool) {
        let start = cursor
        while cursor < bytes.count {
            if isSpace(bytes[cursor]) {
                cursor += 1
            } else if bytes[cursor] == UInt8(ascii: "#") {
                while cursor < bytes.count, bytes[cursor] != 0x0A, bytes[cursor] != 0x0D { cursor += 1 }
            } else {
                break
            }
        }
        let separated = cursor > start
        var value = 0
        var digits = 0
        while cursor < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[cursor]), value <= largestHeaderNumber {
            value = value * 10 + Int(bytes[cursor] - UInt8(ascii: "0"))
            digits += 1
            cursor += 1
        }
        return (value, digits, separated)
    }

    /// Reads the next decimal number, skipping whitespace and `#` comments before it.
    private static func headerNumber(_ bytes: [UInt8], _ cursor: inout Int, _ field: String) throws(QRError) -> Int {
        let number = nextHeaderNumber(bytes, &cursor)
        guard number.value <= largestHeaderNumber else { throw QRError(.notAnImage, "PGM: \(field) is too large") }
        guard number.digits > 0 else { throw QRError(.notAnImage, "PGM: missing or malformed \(field)") }
        return number.value
    }
}
