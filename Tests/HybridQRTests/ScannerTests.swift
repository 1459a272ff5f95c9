import Foundation
import HybridQR
import Testing

/// Input sniffing, PGM, ANSI captures, and the specific errors for bad input.
@Suite("Scanner")
struct ScannerTests {
    let matrix: QRMatrix

    init() throws {
        matrix = try QREncoder.encode(fidoURL: Fixtures.chromeURL)
    }

    /// Writes bytes to a fresh file and runs `body` with its path.
    private func withFile<T>(_ bytes: [UInt8], name: String, _ body: (String) throws -> T) throws -> T {
        let directory = try Fixtures.makeTemporaryDirectory()
        defer { Fixtures.removeDirectory(directory) }
        let url = directory.appendingPathComponent(name)
        try Data(bytes).write(to: url)
        return try body(url.path)
    }

    // MARK: - Inputs that work

    @Test("a capture with log lines, the URL line, ANSI colours and CRLF around the art")
    func noisyCapture() throws {
        let art = TerminalArt.render(matrix, inverted: true)
        let coloured = art.split(separator: "\n").map { "\u{1B}[97;40m\($0)\u{1B}[0m" }.joined(separator: "\r\n")
        let capture = """
            \u{1B}]0;hybrid-sim\u{07}$ hybrid-sim qr show FIDO:/…
            2026-11-22T10:00:00Z info: showing QR code █ for the phone
            \(coloured)
            \(Fixtures.chromeURL)
            $ \u{1B}[1mdone\u{1B}(B

            """
        #expect(try QRScanner.scan(text: capture) == Fixtures.chromeURL)
        #expect(try QRScanner.scan(bytes: Array(capture.utf8)) == Fixtures.chromeURL)
    }

    @Test("indented art and a single blank line are tolerated")
    func indentedArt() throws {
        let art = TerminalArt.render(matrix).split(separator: "\n").map { "    " + $0 }.joined(separator: "\n")
        #expect(try QRScanner.scan(text: "header\n\n" + art + "\n\nfooter") == Fixtures.chromeURL)
    }

    @Test("ANSI stripping removes CSI, OSC and charset sequences only")
    func stripANSI() {
        let text = "a\u{1B}[1;31mb\u{1B}]8;;http://x\u{1B}\\c\u{1B}(Bd\u{9B}2Ke\r"
        #expect(TerminalArtReader.stripANSI(text) == "abcde")
    }

    @Test("binary P5 and ASCII P2 graymaps, 8- and 16-bit, with comments")
    func pgm() throws {
        let image = GrayImage(matrix: matrix, moduleSize: 3)
        let p5 = Array("P5\n# made by a test\n\(image.width) \(image.height)\n255\n".utf8) + image.pixels
        #expect(QRScanner.sniff(p5) == .pgm)
        #expect(try PGMReader.decode(p5) == image)
        #expect(try QRScanner.scan(bytes: p5) == Fixtures.chromeURL)

        let p5wide = Array("P5 \(image.width) \(image.height) 65535\n".utf8)
            + image.pixels.flatMap { [$0, $0] }
        #expect(try PGMReader.decode(p5wide) == image)

        let samples = image.pixels.map { $0 == 0 ? "0" : "15" }.joined(separator: " ")
        let p2 = Array("P2\n\(image.width) \(image.height)\n# comment\n15\n\(samples)\n".utf8)
        #expect(try PGMReader.decode(p2) == image)
        #expect(try withFile(p2, name: "code.pgm") { try QRScanner.scan(fileAt: $0) } == Fixtures.chromeURL)
    }

    @Test("a light-on-dark PNG (negative) still scans")
    func negativeImage() throws {
        let negative = GrayImage(matrix: matrix, moduleSize: 4).inverted()
        #expect(try QRScanner.scan(image: negative) == Fixtures.chromeURL)
    }

    @Test("1 pixel per module is too small for zbar as is, the 3× retry rescues it")
    func tinyModules() throws {
        let tiny = GrayImage(matrix: matrix, moduleSize: 1)
        #expect(try QRScanner.scan(image: tiny) == Fixtures.chromeURL)
    }

    // MARK: - Errors

    @Test("random bytes named .png → not an image")
    func randomBytes() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20 {
            let bytes = (0..<2_048).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
            #expect(throws: QRError(.notAnImage)) { try withFile(bytes, name: "junk.png") { try QRScanner.scan(fileAt: $0) } }
        }
    }

    @Test("a PNG signature followed by junk, an empty file, a missing file")
    func brokenFiles() throws {
        let fake = PNGCodec.signature + Array(repeating: 0x42, count: 100)
        #expect(throws: QRError(.notAnImage)) { try withFile(fake, name: "fake.png") { try QRScanner.scan(fileAt: $0) } }
        #expect(throws: QRError(.notAnImage)) { try withFile([], name: "empty.png") { try QRScanner.scan(fileAt: $0) } }
        #expect(throws: QRError(.fileUnreadable)) { try QRScanner.scan(fileAt: "/nonexistent/dir/code.png") }
        #expect(throws: QRError(.notAnImage)) { try QRScanner.scan(bytes: Array("P5\n10 10\n255\n".utf8) + [1, 2, 3]) }
        #expect(throws: QRError(.notAnImage)) { try PGMReader.decode(Array("P2\n2 1\n255\n7 300\n".utf8)) }
        #expect(throws: QRError(.notAnImage)) { try PGMReader.decode(Array("P5\n99999999 99999999\n255\n".utf8)) }
    }

    @Test("valid PNGs with no code: blank and noise → no QR code found")
    func noCode() throws {
        let blank = try GrayImage(width: 200, height: 200, pixels: Array(repeating: 255, count: 40_000))
        var generator = SystemRandomNumberGenerator()
        let noise = try GrayImage(
            width: 200, height: 200,
            pixels: (0..<40_000).map { _ in Bool.random(using: &generator) ? 0 : 255 })
        for image in [blank, noise] {
            let bytes = try PNGCodec.encode(image)
            #expect(throws: QRError(.noQRCode)) { try withFile(bytes, name: "nothing.png") { try QRScanner.scan(fileAt: $0) } }
        }
    }

    @Test("a QR holding https://example.com → not a FIDO URL")
    func notFIDO() throws {
        let image = GrayImage(matrix: try QREncoder.encode(text: "https://example.com"))
        let error = #expect(throws: QRError(.notFIDOURL)) { try QRScanner.scanFIDO(image: image) }
        #expect(error?.description.contains("https://example.com") == true)
        #expect(throws: QRError(.notFIDOURL)) {
            try QRScanner.scanFIDO(text: TerminalArt.render(try QREncoder.encode(text: "FIDO:")))
        }
    }

    @Test("the FIDO:/ prefix check ignores ASCII case only")
    func prefixCase() {
        #expect(FIDOURL.hasPrefix("FIDO:/1") && FIDOURL.hasPrefix("fido:/") && FIDOURL.hasPrefix("FiDo:/"))
        #expect(!FIDOURL.hasPrefix("fıdo:/1") && !FIDOURL.hasPrefix("FIDO:") && !FIDOURL.hasPrefix(" FIDO:/"))
    }

    @Test("an SVG file is refused with a hint, not misread as text")
    func svgRefused() throws {
        let svg = SVGRenderer.render(matrix)
        let error = #expect(throws: QRError(.notAnImage)) { try QRScanner.scan(bytes: Array(svg.utf8)) }
        #expect(error?.reason.contains("PNG") == true)
    }

    @Test("FIDO:/999 and other broken payloads → payload invalid, naming the rule")
    func invalidPayload() throws {
        for url in ["FIDO:/999", "FIDO:/12", "FIDO:/000879659314054740000000000000000000000000000000000000"] {
            let art = TerminalArt.render(try QREncoder.encode(fidoURL: url))
            let error = #expect(throws: QRError(.invalidFIDOPayload)) { try QRScanner.scanFIDO(text: art) }
            #expect(error?.reason.isEmpty == false, "\(url)")
        }
        // A FIDO prefix with nothing usable after it, in byte mode.
        #expect(throws: QRError(.invalidFIDOPayload)) {
            try QRScanner.scanFIDO(image: GrayImage(matrix: try QREncoder.encode(text: "fido:/abc")))
        }
    }

    @Test("truncated terminal art → no QR code found, never a crash")
    func truncatedArt() throws {
        for inverted in [false, true] {
            let lines = TerminalArt.render(matrix, inverted: inverted).split(separator: "\n")
            let topHalf = lines.prefix(lines.count / 2).joined(separator: "\n")
            let bottomHalf = lines.suffix(lines.count / 2).joined(separator: "\n")
            let leftHalf = lines.map { $0.prefix($0.count / 2) }.joined(separator: "\n")
            for text in [topHalf, bottomHalf, leftHalf] {
                #expect(throws: QRError(.noQRCode)) { try QRScanner.scanFIDO(text: text) }
            }
        }
    }

    @Test("text without art → no QR code found; binary junk → not an image")
    func textWithoutArt() throws {
        #expect(throws: QRError(.noQRCode)) { try QRScanner.scan(text: "hello\nworld\n") }
        #expect(throws: QRError(.noQRCode)) { try QRScanner.scan(bytes: Array("just a log line\n".utf8)) }
        #expect(throws: QRError(.notAnImage)) { try QRScanner.scan(bytes: [0x00, 0x01, 0x02, 0xFF]) }
        #expect(throws: QRError(.notAnImage)) { try QRScanner.scan(bytes: []) }
        #expect(throws: QRError(.noQRCode)) { try QRScanner.scan(text: "█▀▄\n▄▀█\n") }
    }
}
