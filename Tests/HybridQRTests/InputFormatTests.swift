import Foundation
import HybridQR
import Testing

/// Inputs in formats other than PNG, PGM and UTF-8 text: decoded when they are text (UTF-16 with a
/// byte-order mark), named when they are another image format.
@Suite("Input formats")
struct InputFormatTests {
    /// The Chrome code as normal terminal art, as PowerShell writes a captured line: CRLF endings.
    private func art() throws -> String {
        TerminalArt.render(try QREncoder.encode(fidoURL: Fixtures.chromeURL)).replacingOccurrences(of: "\n", with: "\r\n")
    }

    /// `text` as UTF-16 code units in bytes, big- or little-endian, after a byte-order mark.
    private func utf16(_ text: String, bigEndian: Bool) -> [UInt8] {
        ("\u{FEFF}" + text).utf16.flatMap { unit in
            let (high, low) = (UInt8(unit >> 8), UInt8(unit & 0xFF))
            return bigEndian ? [high, low] : [low, high]
        }
    }

    @Test("UTF-16LE and UTF-16BE text with a byte-order mark (Windows PowerShell 5.1's >) is read as text")
    func utf16WithMark() throws {
        for bigEndian in [false, true] {
            let bytes = utf16(try art() + "\r\n" + Fixtures.chromeURL + "\r\n", bigEndian: bigEndian)
            #expect(QRScanner.sniff(bytes) == .text)
            #expect(try QRScanner.scan(bytes: bytes) == Fixtures.chromeURL, "big-endian: \(bigEndian)")
            #expect(try QRScanner.scanFIDO(bytes: bytes).url == Fixtures.chromeURL)
        }
    }

    @Test("UTF-16 cut short after its mark, and UTF-16 without a mark, are refused saying so")
    func utf16Refused() throws {
        let cut = Array(utf16("hello", bigEndian: false).dropLast())
        let error = #expect(throws: QRError(.notAnImage)) { try QRScanner.scan(bytes: cut) }
        #expect(error?.reason.contains("UTF-16LE byte-order mark but has an odd number of bytes (11): UTF-16 text cut short") == true,
                "\(String(describing: error))")
        let surrogate: [UInt8] = [0xFF, 0xFE, 0x00, 0xD8, 0x41, 0x00]
        let lone = #expect(throws: QRError(.notAnImage)) { try QRScanner.scan(bytes: surrogate) }
        #expect(lone?.reason.contains("UTF-16LE byte-order mark but is not valid UTF-16 text (a lone surrogate or a NUL)") == true,
                "\(String(describing: lone))")
        let unmarked = Array(utf16("hello", bigEndian: false).dropFirst(2))
        let noMark = #expect(throws: QRError(.notAnImage)) { try QRScanner.scan(bytes: unmarked) }
        #expect(noMark?.reason.contains("iconv -f UTF-16LE -t UTF-8") == true, "\(String(describing: noMark))")
    }

    /// The first bytes of a file in each format HybridSim does not read, with the name and file
    /// extension a refusal must give.
    static let foreign: [(bytes: [UInt8], name: String, fileExtension: String)] = [
        ([0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10] + Array("JFIF".utf8) + [0, 1, 1, 0], "a JPEG image", "jpg"),
        (Array("GIF89a".utf8) + [0x68, 0x01, 0x68, 0x01, 0xF0, 0x01, 0, 0], "a GIF image", "gif"),
        (Array("BM".utf8) + Array(repeating: 0, count: 52), "a BMP image", "bmp"),
        (Array("RIFF".utf8) + [4, 6, 0, 0] + Array("WEBPVP8 ".utf8) + [0, 0, 0, 0], "a WebP image", "webp"),
        ([0x49, 0x49, 0x2A, 0x00, 8, 0, 0, 0, 0, 0], "a TIFF image", "tiff"),
        ([0x4D, 0x4D, 0x00, 0x2A, 0, 0, 0, 8, 0, 0], "a TIFF image", "tiff"),
        ([0, 0, 0, 0x18] + Array("ftypheic".utf8) + [0, 0, 0, 0] + Array("mif1heic".utf8), "a HEIC (HEIF) image", "heic"),
        ([0, 0, 0, 0x1C] + Array("ftypavif".utf8) + [0, 0, 0, 0] + Array("avifmif1".utf8), "an AVIF image", "avif"),
        (Array("P6\n2 2\n255\n".utf8) + Array(repeating: 128, count: 12), "a PPM colour image (P6)", "ppm"),
        (Array("P4\n# a bitmap\n8 2\n".utf8) + [0x55, 0xAA], "a PBM bitmap (P4)", "pbm"),
        (Array("P1\n2 2\n0 1\n1 0\n".utf8), "an ASCII PBM bitmap (P1)", "pbm"),
        (Array("P3#c\n1 1\n255\n0 0 0\n".utf8), "an ASCII PPM colour image (P3)", "ppm"),
        (Array("P7\nWIDTH 1\nHEIGHT 1\nDEPTH 1\nMAXVAL 255\nTUPLTYPE GRAYSCALE\nENDHDR\n".utf8) + [0], "a PAM image (P7)", "pam"),
    ]

    @Test("other image formats are named by their magic bytes, with a conversion hint", arguments: 0..<13)
    func foreignFormatNamed(index: Int) throws {
        let (bytes, name, fileExtension) = Self.foreign[index]
        #expect(QRScanner.sniff(bytes) == nil)
        let error = #expect(throws: QRError(.notAnImage)) { try QRScanner.scan(bytes: bytes) }
        #expect(error?.reason.contains("this is \(name); HybridSim reads PNG, PGM or terminal text") == true, "\(String(describing: error))")
        #expect(error?.reason.contains("convert in.\(fileExtension) out.png") == true, "\(String(describing: error))")
    }

    @Test("UTF-32 text (either byte-order mark) is named as UTF-32, not called invalid UTF-16")
    func utf32Named() throws {
        for (bytes, name) in [([0xFF, 0xFE, 0, 0, 0x41, 0, 0, 0] as [UInt8], "UTF-32LE"), ([0, 0, 0xFE, 0xFF, 0, 0, 0, 0x41], "UTF-32BE")] {
            #expect(QRScanner.sniff(bytes) == nil)
            let error = #expect(throws: QRError(.notAnImage)) { try QRScanner.scan(bytes: bytes) }
            #expect(error?.reason == "input: it is \(name) text (it starts with that byte-order mark), which is not read: "
                + "save the capture as UTF-8 (iconv -f UTF-32 -t UTF-8)", "\(String(describing: error))")
        }
    }

    @Test("a line of text that starts like a Netpbm magic number is still text")
    func netpbmLikeText() {
        #expect(QRScanner.sniff(Array("P1 is the first pane\n".utf8)) == .text)
        #expect(QRScanner.sniff(Array("P3\nhello\n".utf8)) == .text)
    }

    @Test("a log line starting with P1 or P3, whitespace and a digit is text unless a whole Netpbm header follows, and art after it scans")
    func netpbmLikeLogLine() throws {
        let art = TerminalArt.render(try QREncoder.encode(fidoURL: Fixtures.chromeURL))
        for line in ["P1 2024-11-27T10:00:00 desktop started", "P3 10 20 pane", "P1 4 4x", "P3 1 1 256 x", "P1\t12 7\tb"] {
            #expect(QRScanner.sniff(Array((line + "\n").utf8)) == .text, "\(line)")
            #expect(try QRScanner.scan(bytes: Array((line + "\n" + art + "\n").utf8)) == Fixtures.chromeURL, "\(line)")
        }
        #expect(QRScanner.sniff(Array("P1 # a comment\n3 1 0 1 0\n".utf8)) == nil)
        #expect(QRScanner.sniff(Array("P3 1 1 255\n0 0 0\n".utf8)) == nil)
    }

    @Test("a PGM with a comment straight after its magic number (P5#comment), as Netpbm allows, is read")
    func commentAfterMagic() throws {
        let image = GrayImage(matrix: try QREncoder.encode(fidoURL: Fixtures.chromeURL), moduleSize: 3)
        let p5 = Array("P5# made by a test\n\(image.width) \(image.height)\n255\n".utf8) + image.pixels
        #expect(QRScanner.sniff(p5) == .pgm)
        #expect(try PGMReader.decode(p5) == image)
        #expect(try QRScanner.scan(bytes: p5) == Fixtures.chromeURL)
    }
}
