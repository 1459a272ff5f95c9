import Foundation
import HybridQR
import Testing

/// The shape of the terminal art, the PNG and the SVG.
@Suite("Rendering")
struct RenderTests {
    let matrix: QRMatrix

    init() throws {
        matrix = try QREncoder.encode(fidoURL: Fixtures.chromeURL)
    }

    @Test("terminal art: two module rows per line, 4-module quiet zone, only half blocks")
    func terminalShape() {
        let lines = TerminalArt.render(matrix).split(separator: "\n", omittingEmptySubsequences: false)
        let side = matrix.size + 8
        #expect(lines.count == (side + 1) / 2)
        #expect(lines.allSatisfy { $0.count == side })
        #expect(lines.allSatisfy { $0.allSatisfy { " ▀▄█".contains($0) } })
        // Quiet zone: the first two lines (4 module rows) and the first four columns are blank.
        #expect(lines[0].allSatisfy { $0 == " " } && lines[1].allSatisfy { $0 == " " })
        #expect(lines.allSatisfy { $0.prefix(4).allSatisfy { $0 == " " } })
        // Line 2 holds module rows 0 and 1: the top of the finder pattern is a full dark row.
        #expect(lines[2].dropFirst(4).prefix(7).allSatisfy { $0 == "█" || $0 == "▀" })
    }

    @Test("inverted art inks the quiet zone and leaves dark modules blank")
    func invertedShape() {
        let normal = TerminalArt.render(matrix).split(separator: "\n").map(Array.init)
        let inverted = TerminalArt.render(matrix, inverted: true).split(separator: "\n").map(Array.init)
        #expect(inverted[0].allSatisfy { $0 == "█" })
        #expect(inverted.last?.allSatisfy { $0 == "█" } == true)
        let swap: [Character: Character] = [" ": "█", "█": " ", "▀": "▄", "▄": "▀"]
        for (normalLine, invertedLine) in zip(normal, inverted) {
            #expect(normalLine.map { swap[$0] } == invertedLine.map { Optional($0) })
        }
    }

    @Test("quiet zone is configurable")
    func quietZoneOption() throws {
        let tight = TerminalArt.render(matrix, quietZone: 2).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(tight.first?.count == matrix.size + 4)
        #expect(try QRScanner.scan(text: tight.joined(separator: "\n")) == Fixtures.chromeURL)
    }

    @Test("GrayImage: integer pixels per module and a 4-module white margin")
    func grayImage() {
        let image = GrayImage(matrix: matrix, moduleSize: 8)
        #expect(image.width == (matrix.size + 8) * 8 && image.height == image.width)
        #expect(image.pixels[0] == 255)
        // Module (0, 0) is dark and fills pixels 32 ..< 40 in both directions.
        #expect(image.pixels[32 * image.width + 32] == 0)
        #expect(image.pixels[39 * image.width + 39] == 0)
        #expect(image.pixels[31 * image.width + 32] == 255)
        #expect(Set(image.pixels) == [0, 255])
    }

    @Test("PNG: written by libpng, read back pixel-identical, 8-bit grayscale")
    func pngRoundTrip() throws {
        let image = GrayImage(matrix: matrix, moduleSize: 5)
        let bytes = try PNGCodec.encode(image)
        #expect(Array(bytes.prefix(8)) == PNGCodec.signature)
        // IHDR: bit depth 8 (offset 24), colour type 0 = grayscale (offset 25).
        #expect(bytes[24] == 8 && bytes[25] == 0)
        #expect(try PNGCodec.decode(bytes) == image)

        let directory = try Fixtures.makeTemporaryDirectory()
        defer { Fixtures.removeDirectory(directory) }
        let path = directory.appendingPathComponent("qr.png").path
        #expect(FileManager.default.createFile(atPath: path, contents: Data("old".utf8), attributes: [.posixPermissions: 0o644]))
        try PNGCodec.write(image, toFile: path)
        #expect(try PNGCodec.read(fileAt: path) == image)
        // The image of a FIDO:/ code holds its QR secret: owner only, also over a file that was 0644.
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int == 0o600)
        #expect(throws: QRError(.writeFailed)) {
            try PNGCodec.write(image, toFile: directory.appendingPathComponent("missing/qr.png").path)
        }
    }

    @Test("SVG: viewBox with quiet zone, one path, every dark module covered once")
    func svg() {
        let svg = SVGRenderer.render(matrix, moduleSize: 4)
        let side = matrix.size + 8
        #expect(svg.contains("viewBox=\"0 0 \(side) \(side)\""))
        #expect(svg.contains("width=\"\(side * 4)\""))
        #expect(svg.components(separatedBy: "<path").count == 2)
        // Sum the run lengths in the path: they must add up to the dark-module count.
        let runs = svg.split(separator: "h").dropFirst().compactMap { Int($0.prefix(while: \.isNumber)) }
        #expect(runs.reduce(0, +) == matrix.darkModuleCount)
    }

    @Test("SVG file: written as UTF-8, write errors are typed")
    func svgFile() throws {
        let directory = try Fixtures.makeTemporaryDirectory()
        defer { Fixtures.removeDirectory(directory) }
        let path = directory.appendingPathComponent("qr.svg").path
        try SVGRenderer.write(matrix, toFile: path)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == SVGRenderer.render(matrix))
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int == 0o600)
        #expect(throws: QRError(.writeFailed)) { try SVGRenderer.write(matrix, toFile: directory.path + "/no/such/dir.svg") }
    }
}
