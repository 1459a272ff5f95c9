import Foundation
import HybridCore
import HybridQR
import HybridTestSupport
import Testing

/// The two captured real-world URLs print, scan back and parse to the fields in
/// `/work/shared/vectors/qr.json` (`decoded`).
@Suite("Real-world FIDO:/ URLs")
struct RealWorldTests {
    /// The expected decoded fields of one captured URL.
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let url: String
        let publicKey: String
        let secret: String
        let timestamp: UInt64
        let supportsLinking: Bool
        var testDescription: String { name }
    }

    static let cases = [
        Case(
            name: "Chrome", url: Fixtures.chromeURL,
            publicKey: "03dd39afaf50b1b5b05ac1dad0b2848a00c0f6ec4e65a25687ca4f3c71dae50bea",
            secret: "871bcec9c1227f91ccb86c9ffacd9eac", timestamp: 1_666_589_051, supportsLinking: true),
        Case(
            name: "Safari iOS", url: Fixtures.safariURL,
            publicKey: "02f61f4ae0ac101efd66c6c728d059c7c6212cecfab79109c01c56a87099887d44",
            secret: "f052eb83c3ff0421b46ae118fb4a928f", timestamp: 1_670_820_400, supportsLinking: false),
    ]

    /// Checks the parsed fields against the vector.
    private func checkFields(_ scan: FIDOScan, _ expected: Case) {
        #expect(scan.url == expected.url)
        #expect(scan.payload.compressedPublicKey == hex(expected.publicKey))
        #expect(scan.payload.secret == hex(expected.secret))
        #expect(scan.payload.knownDomainCount == 2)
        #expect(scan.payload.timestamp == expected.timestamp)
        #expect(scan.payload.supportsLinking == expected.supportsLinking)
        #expect(scan.payload.requestType == .makeCredential)
    }

    @Test("prints as art and scans back (normal, inverted, trimmed)", arguments: cases)
    func art(_ expected: Case) throws {
        let matrix = try QREncoder.encode(fidoURL: expected.url)
        for inverted in [false, true] {
            let art = TerminalArt.render(matrix, inverted: inverted)
            checkFields(try QRScanner.scanFIDO(text: art), expected)
            checkFields(try QRScanner.scanFIDO(text: Fixtures.strippingTrailingSpaces(art)), expected)
        }
    }

    @Test("writes a PNG file that scans back", arguments: cases)
    func pngFile(_ expected: Case) throws {
        let directory = try Fixtures.makeTemporaryDirectory()
        defer { Fixtures.removeDirectory(directory) }
        let path = directory.appendingPathComponent("real.png").path
        try PNGCodec.write(GrayImage(matrix: try QREncoder.encode(fidoURL: expected.url)), toFile: path)
        checkFields(try QRScanner.scanFIDO(fileAt: path), expected)
    }

    @Test("--decode JSON: one object, fields from the vector", arguments: cases)
    func json(_ expected: Case) throws {
        let scan = try QRScanner.fido(from: [expected.url])
        let object = try #require(
            JSONSerialization.jsonObject(with: Data(scan.payloadJSON.utf8)) as? [String: Any])
        #expect(object["publicKey"] as? String == expected.publicKey)
        #expect(object["secret"] as? String == expected.secret)
        #expect(object["knownDomains"] as? Int == 2)
        #expect(object["timestamp"] as? Int == Int(expected.timestamp))
        #expect(object["supportsLinking"] as? Bool == expected.supportsLinking)
        #expect(object["requestType"] as? String == "mc")
        #expect(scan.payloadJSON.hasPrefix("{\"publicKey\":"))
        #expect(!scan.payloadJSON.contains("\n"))
    }

    @Test("--decode JSON writes null for absent optional keys")
    func jsonNulls() throws {
        let payload = Fixtures.randomPayload(variant: 1)  // no timestamp, supportsLinking true
        let bare = QRPayload(compressedPublicKey: payload.compressedPublicKey, secret: payload.secret)
        let json = try QRScanner.fido(from: [bare.url]).payloadJSON
        #expect(json.contains("\"timestamp\":null") && json.contains("\"supportsLinking\":null"))
        #expect(json.contains("\"requestType\":\"ga\""))
    }

    @Test("the URL re-encodes identically from its parsed payload", arguments: cases)
    func reencode(_ expected: Case) throws {
        #expect(try QRPayload(url: expected.url).url == expected.url)
    }
}
