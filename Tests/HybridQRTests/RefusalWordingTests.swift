import Foundation
import HybridQR
import Testing

/// Refusals that say what is wrong with the input and what to do: a cut-short or damaged PNG, an
/// image over the size limit, a code whose digits end in whitespace.
@Suite("Refusal wording")
struct RefusalWordingTests {
    /// The Chrome code as PNG bytes.
    private func png() throws -> [UInt8] {
        try PNGCodec.encode(GrayImage(matrix: try QREncoder.encode(fidoURL: Fixtures.chromeURL), moduleSize: 4))
    }

    @Test("a PNG cut short says so, in memory and as a file; a flipped byte in its data says it is damaged")
    func damagedPNG() throws {
        let bytes = try png()
        let cut = Array(bytes.prefix(bytes.count / 2))
        let error = #expect(throws: QRError(.notAnImage)) { try QRScanner.scan(bytes: cut) }
        #expect(error?.reason.contains("the PNG is cut short") == true, "\(String(describing: error))")
        let directory = try Fixtures.makeTemporaryDirectory()
        defer { Fixtures.removeDirectory(directory) }
        let path = directory.appendingPathComponent("cut.png").path
        try Data(cut).write(to: URL(fileURLWithPath: path))
        let fileError = #expect(throws: QRError(.notAnImage)) { try QRScanner.scan(fileAt: path) }
        #expect(fileError?.reason.contains("the PNG is cut short") == true, "\(String(describing: fileError))")

        var flipped = bytes
        flipped[bytes.count - 20] ^= 0xFF  // inside the IDAT chunk: its CRC no longer matches
        let damaged = #expect(throws: QRError(.notAnImage)) { try QRScanner.scan(bytes: flipped) }
        #expect(damaged?.reason.contains("the PNG is damaged; libpng: ") == true, "\(String(describing: damaged))")
    }

    @Test("an image so large that even 1 % of it is over the limit is called too large to be a screen capture, with no percentage")
    func farTooLarge() throws {
        let error = #expect(throws: QRError(.notAnImage)) { try QRScanner.scan(bytes: Array("P5\n1000000 1000000\n255\n".utf8)) }
        #expect(error?.reason.hasSuffix("HybridSim reads, and too large to be a screen capture or a photo") == true, "\(String(describing: error))")
        #expect(error?.reason.contains("resize") == false)
    }

    @Test("an image over 64 Mpx names the limit and how far to downscale, whatever its format")
    func tooLarge() throws {
        let expected = "the image is 10000×10000 pixels, more than the 64 Mpx (67108864 pixels) HybridSim reads: downscale it"
        let pgm = #expect(throws: QRError(.notAnImage)) { try QRScanner.scan(bytes: Array("P5\n10000 10000\n255\n".utf8)) }
        #expect(pgm?.reason.contains(expected) == true, "\(String(describing: pgm))")
        #expect(pgm?.reason.hasSuffix("convert in.png -resize 81% out.png") == true, "\(String(describing: pgm))")
        let png = #expect(throws: QRError(.notAnImage)) { try QRScanner.scan(bytes: Self.pngHeader(width: 10_000, height: 10_000)) }
        #expect(png?.reason.contains(expected) == true, "\(String(describing: png))")
        let image = #expect(throws: QRError(.notAnImage)) { try GrayImage(width: 10_000, height: 10_000, pixels: []) }
        #expect(image?.reason.contains(expected) == true, "\(String(describing: image))")
    }

    @Test("a code holding its URL with a trailing line break: payload invalid, naming the character, its position and the trailing whitespace")
    func trailingWhitespaceInCode() throws {
        let image = GrayImage(matrix: try QREncoder.encode(text: Fixtures.chromeURL + "\r\n"))
        let error = #expect(throws: QRError(.invalidFIDOPayload)) { try QRScanner.scanFIDO(image: image) }
        #expect(error?.reason.hasPrefix("character 169 of the digits, \"\\u{D}\" (U+000D), is not an ASCII digit: the digits end in trailing whitespace \"\\u{D}\\u{A}\"") == true,
                "\(String(describing: error))")
    }

    /// A PNG signature, an IHDR chunk for an 8-bit grayscale image of the given size and an empty
    /// IDAT chunk (where libpng stops reading the header; the size check comes before the data).
    static func pngHeader(width: UInt32, height: UInt32) -> [UInt8] {
        func bigEndian(_ value: UInt32) -> [UInt8] { [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: value >> $0) } }
        func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
            let body = Array(type.utf8) + data
            return bigEndian(UInt32(data.count)) + body + bigEndian(crc32(body))
        }
        return PNGCodec.signature + chunk("IHDR", bigEndian(width) + bigEndian(height) + [8, 0, 0, 0, 0]) + chunk("IDAT", [])
    }

    /// CRC-32 (ISO-HDLC, as PNG chunks use), bit by bit.
    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
}
