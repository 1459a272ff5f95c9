import HybridCore
import HybridQR
import Testing

/// encode → render → scan → parse, for many freshly generated payloads.
@Suite("Round trip of fresh payloads")
struct RoundTripTests {
    /// How many random payloads each test pushes through its path.
    static let count = 200

    /// Fresh payloads covering every combination of the optional keys.
    let payloads = (0..<Self.count).map(Fixtures.randomPayload(variant:))

    /// Checks that a scan gave back exactly the URL and payload that were encoded.
    private func check(_ scanned: FIDOScan, _ payload: QRPayload, path: String) {
        #expect(scanned.url == payload.url, "\(path): URL differs for \(payload.url)")
        #expect(scanned.payload == payload, "\(path): payload differs for \(payload.url)")
    }

    @Test("terminal art (normal) scans back to the same URL and payload")
    func terminalArt() throws {
        for payload in payloads {
            let art = TerminalArt.render(try QREncoder.encode(fidoURL: payload.url))
            check(try QRScanner.scanFIDO(text: art), payload, path: "art")
        }
    }

    @Test("inverted terminal art scans back")
    func invertedArt() throws {
        for payload in payloads {
            let art = TerminalArt.render(try QREncoder.encode(fidoURL: payload.url), inverted: true)
            check(try QRScanner.scanFIDO(text: art), payload, path: "inverted art")
        }
    }

    @Test("art with trailing spaces stripped (tmux capture-pane) scans back, both polarities")
    func strippedArt() throws {
        for (index, payload) in payloads.enumerated() {
            let matrix = try QREncoder.encode(fidoURL: payload.url)
            let art = TerminalArt.render(matrix, inverted: index % 2 == 1)
            let captured = Fixtures.strippingTrailingSpaces(art)
            if index % 2 == 0 { #expect(captured != art) }
            check(try QRScanner.scanFIDO(text: captured), payload, path: "stripped art")
        }
    }

    @Test("PNG bytes (libpng simplified API) scan back")
    func png() throws {
        for payload in payloads {
            // 4 px per module keeps the loop fast; `pngFiles` covers 3…8 px.
            let image = GrayImage(matrix: try QREncoder.encode(fidoURL: payload.url), moduleSize: 4)
            let bytes = try PNGCodec.encode(image)
            #expect(QRScanner.sniff(bytes) == .png)
            check(try QRScanner.scanFIDO(bytes: bytes), payload, path: "PNG")
        }
    }

    @Test("PNG files scan back through scanFIDO(fileAt:)")
    func pngFiles() throws {
        let directory = try Fixtures.makeTemporaryDirectory()
        defer { Fixtures.removeDirectory(directory) }
        for (index, payload) in payloads.prefix(40).enumerated() {
            let path = directory.appendingPathComponent("code-\(index).png").path
            try PNGCodec.write(GrayImage(matrix: try QREncoder.encode(fidoURL: payload.url), moduleSize: 3 + index % 6), toFile: path)
            check(try QRScanner.scanFIDO(fileAt: path), payload, path: "PNG file")
        }
    }
}
