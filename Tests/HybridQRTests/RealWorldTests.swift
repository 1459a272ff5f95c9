import Foundation
import HybridCore
import HybridQR
import HybridTestSupport
import Testing

/// The two captured real-world URLs (Chrome, Safari on iOS) print, scan back and parse to the
/// fields recorded beside them in `Vectors/qr.json`.
@Suite("Real-world FIDO:/ URLs")
struct RealWorldTests {
    /// The expected decoded fields of one captured URL, as `Vectors/qr.json` stores them.
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let url: String
        let publicKey: String
        let secret: String
        let timestamp: UInt64?
        let supportsLinking: Bool?
        var testDescription: String { name }
    }

    /// The vectors captured from real browsers (those with `reencodesIdentically`), loaded from the
    /// published file so the QR tests and the core tests check the same values.
    static let cases: [Case] = {
        let all = (try? QRVector.load()) ?? []
        return all.compactMap { entry in
            guard entry.reencodesIdentically != nil, let key = entry.publicKey,
                let secret = entry.secret
            else { return nil }
            return Case(
                name: entry.name, url: entry.url, publicKey: key, secret: secret, timestamp: entry.timestamp,
                supportsLinking: entry.supportsLinking)
        }
    }()

    @Test("Vectors/qr.json holds both captured URLs, the same as the scanner fixtures")
    func vectorsPresent() {
        #expect(Self.cases.map(\.url) == [Fixtures.chromeURL, Fixtures.safariURL])
    }

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
        #expect(object["timestamp"] as? Int == expected.timestamp.map { Int($0) })
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
