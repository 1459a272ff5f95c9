import HybridCore
import HybridQR
import Testing

/// Segmenting, version selection and the symbol-size figures quoted in `Docs/QR.md`.
@Suite("Encoder")
struct EncoderTests {
    @Test("FIDO:/ URLs split into an alphanumeric prefix and a numeric digit run")
    func segments() throws {
        let segments = try QREncoder.segments(forFIDOURL: Fixtures.chromeURL)
        #expect(segments.map(\.mode) == [.alphanumeric, .numeric])
        #expect(segments[0].bytes == Array("FIDO:/".utf8))
        #expect(segments[1].bytes.count == 168)
        // A lower-case prefix is not in the alphanumeric set, so it goes in byte mode.
        let lower = try QREncoder.segments(forFIDOURL: "fido:/123")
        #expect(lower.map(\.mode) == [.byte, .numeric])
    }

    @Test("a 168-digit desktop payload: version per level, and numeric vs byte mode")
    func symbolSizes() throws {
        let expected: [(QRErrorCorrection, segmented: Int, byteMode: Int)] = [
            (.low, 4, 8), (.medium, 5, 9), (.quartile, 7, 11), (.high, 8, 13),
        ]
        for (level, segmentedVersion, byteVersion) in expected {
            let segmented = try QREncoder.encode(fidoURL: Fixtures.chromeURL, errorCorrection: level)
            let byteMode = try QREncoder.encode(text: Fixtures.chromeURL, errorCorrection: level)
            #expect(segmented.version == segmentedVersion, "level \(level)")
            #expect(segmented.size == 17 + 4 * segmentedVersion)
            #expect(segmented.errorCorrection == level)
            #expect(byteMode.version == byteVersion, "level \(level)")
        }
        // The default level is M: version 5, 37 × 37 modules.
        let standard = try QREncoder.encode(fidoURL: Fixtures.chromeURL)
        #expect(standard.errorCorrection == .medium)
        #expect(standard.size == 37)
    }

    @Test("byte-mode text scans back verbatim")
    func textRoundTrip() throws {
        for text in ["https://example.com", "héllo wörld", "FIDO:/", String(repeating: "x", count: 500)] {
            let matrix = try QREncoder.encode(text: text)
            #expect(try QRScanner.scan(image: GrayImage(matrix: matrix, moduleSize: 4)) == text, "\(text)")
        }
    }

    @Test("matrix basics: finder pattern corners, roughly half dark, light outside")
    func matrixShape() throws {
        let matrix = try QREncoder.encode(fidoURL: Fixtures.safariURL)
        for (x, y) in [(0, 0), (matrix.size - 1, 0), (0, matrix.size - 1), (6, 6), (2, 2)] {
            #expect(matrix[x, y], "finder module (\(x), \(y)) should be dark")
        }
        #expect(!matrix[7, 7])
        #expect(!matrix[-1, 0] && !matrix[0, matrix.size])
        let share = Double(matrix.darkModuleCount) / Double(matrix.size * matrix.size)
        #expect(share > 0.35 && share < 0.65)
    }

    @Test("rejects bad encoder input with specific errors")
    func rejects() throws {
        #expect(throws: QRError(.invalidInput)) { try QREncoder.encode(fidoURL: "https://example.com") }
        #expect(throws: QRError(.invalidInput)) { try QREncoder.encode(fidoURL: "FIDO:/12a4") }
        #expect(throws: QRError(.invalidInput)) { try QREncoder.encode(fidoURL: "FIDO:") }
        #expect(throws: QRError(.invalidInput)) { try QREncoder.encode(fidoURL: "fıdo:/123") }  // dotless i
        #expect(throws: QRError(.invalidInput)) { try QREncoder.encode(text: "") }
        #expect(throws: QRError(.invalidInput)) { try QRSegment(.alphanumeric, "lower") }
        #expect(throws: QRError(.dataTooLarge)) {
            try QREncoder.encode(text: String(repeating: "a", count: 3_000))
        }
        #expect(throws: QRError(.dataTooLarge)) {
            try QREncoder.encode(fidoURL: "FIDO:/" + String(repeating: "7", count: 8_000))
        }
        #expect(throws: QRError(.invalidInput)) { try QRMatrix(version: 1, errorCorrection: .low, modules: []) }
    }

    @Test("QRError equality is by code and the description reads well")
    func errorShape() {
        let error = QRError(.invalidFIDOPayload, "key 1 (secret) missing")
        #expect(error == QRError(.invalidFIDOPayload))
        #expect(error != QRError(.noQRCode))
        #expect(error.description == "FIDO:/ payload invalid: key 1 (secret) missing")
        #expect(QRError(.noQRCode).description == "no QR code found")
    }
}
