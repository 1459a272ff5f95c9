@testable import HybridQR
import Testing

/// The rasterizer's polarity guess: right first time for our own art, so a scan costs one decode.
@Suite("Terminal art polarity guess")
struct PolarityTests {
    @Test("normal and inverted art, full and trimmed, are read in the right polarity first")
    func guess() throws {
        for _ in 0..<20 {
            let url = Fixtures.randomPayload(variant: Int.random(in: 0..<12)).url
            let matrix = try QREncoder.encode(fidoURL: url)
            for inverted in [false, true] {
                let art = TerminalArt.render(matrix, inverted: inverted)
                for text in [art, Fixtures.strippingTrailingSpaces(art)] {
                    let candidates = try TerminalArtReader.candidates(in: text)
                    #expect(candidates.count == 2)
                    #expect(candidates.first?.inverted == inverted)
                }
            }
        }
    }
}
