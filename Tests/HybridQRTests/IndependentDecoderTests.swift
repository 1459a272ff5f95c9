import Foundation
import HybridCore
import HybridQR
import Testing

/// A second, independent decoder (ZXing-C++, Debian package `zxing-cpp-tools`) reads the PNGs
/// this module writes, so the symbols are not just "whatever zbar accepts".
@Suite("Independent decoder: ZXingReader")
struct IndependentDecoderTests {
    /// Where Debian installs the ZXing-C++ command-line reader.
    static let zxingReader = "/usr/bin/ZXingReader"

    /// Runs `ZXingReader -format QRCode -bytes <png>` and returns what it printed: exactly the
    /// symbol's bytes, nothing else.
    private func zxingDecode(_ path: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.zxingReader)
        process.arguments = ["-format", "QRCode", "-bytes", path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "ZXingReader exit status for \(path)")
        return String(decoding: data, as: UTF8.self)
    }

    @Test("ZXingReader decodes our PNGs to the same URL (real and fresh payloads, every level)")
    func zxingAgrees() throws {
        let installed = FileManager.default.isExecutableFile(atPath: Self.zxingReader)
        try #require(
            installed,
            "\(Self.zxingReader) is missing: install the Debian package zxing-cpp-tools (apt-get install zxing-cpp-tools)")

        let directory = try Fixtures.makeTemporaryDirectory()
        defer { Fixtures.removeDirectory(directory) }
        var urls = [Fixtures.chromeURL, Fixtures.safariURL]
        urls += (0..<8).map { Fixtures.randomPayload(variant: $0).url }
        for (index, url) in urls.enumerated() {
            let level = QRErrorCorrection.allCases[index % 4]
            let path = directory.appendingPathComponent("zxing-\(index).png").path
            let matrix = try QREncoder.encode(fidoURL: url, errorCorrection: level)
            try PNGCodec.write(GrayImage(matrix: matrix, moduleSize: 2 + index % 7), toFile: path)
            #expect(try zxingDecode(path) == url, "level \(level)")
            // And our own scanner agrees on the same file.
            #expect(try QRScanner.scanFIDO(fileAt: path).url == url)
        }
    }
}
