import HybridQR
import Testing

/// Terminal art laid out in ways other encoders, terminals and copies produce: no quiet zone with
/// its trailing spaces trimmed, and lines that carry a prefix.
@Suite("Terminal art layouts")
struct ArtLayoutTests {
    @Test("inverted art without a quiet zone, trailing spaces trimmed (qr show --invert --quiet-zone 0, qrencode -t UTF8 -m 0): its trimmed tails are dark modules", arguments: [0, 1])
    func invertedWithoutQuietZone(variant: Int) throws {
        let url = variant == 0 ? Fixtures.chromeURL : Fixtures.randomPayload(variant: 3).url
        let matrix = try QREncoder.encode(fidoURL: url)
        for inverted in [true, false] {
            let full = TerminalArt.render(matrix, inverted: inverted, quietZone: 0)
            let art = Fixtures.strippingTrailingSpaces(full)
            #expect(art.count < full.count, "the art must have lost trailing spaces")
            #expect(try QRScanner.scanFIDO(text: art).url == url, "inverted: \(inverted)")
        }
    }
}
