import Foundation
import HybridCore
import HybridFiles
import HybridQR
import Testing

/// A second, independent decoder (ZXing-C++, Debian package `zxing-cpp-tools`) reads the PNGs
/// this module writes, so the symbols are not just "whatever zbar accepts".
@Suite("Independent decoder: ZXingReader")
struct IndependentDecoderTests {
    /// Where Debian installs the ZXing-C++ command-line reader.
    static let zxingReader = "/usr/bin/ZXingReader"

    /// Runs `ZXingReader -format QRCode -bytes <png>` and returns what it printed: exactly the
    /// symbol's bytes, nothing else. Started with `ChildSpawn`, not Foundation's `Process`, whose
    /// `run()` can crash on Linux (Docs/ROBUSTNESS.md): this test starts the reader 20 times.
    private func zxingDecode(_ path: String) throws -> String {
        let output = Pipe()
        let reader: ChildSpawn
        do {
            defer { try? output.fileHandleForWriting.close() }
            reader = try ChildSpawn(
                executable: Self.zxingReader, arguments: ["-format", "QRCode", "-bytes", path],
                environment: ProcessInfo.processInfo.environment, input: nil,
                output: output.fileHandleForWriting.fileDescriptor, error: nil)
        }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        let deadline = ContinuousClock.now + .seconds(10)
        while reader.isRunning, ContinuousClock.now < deadline { usleep(2_000) }
        #expect(reader.ended == .exited(0), "ZXingReader exit status for \(path)")
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
