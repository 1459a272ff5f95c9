@testable import HybridQR
import Testing

/// Camera-like pictures of a code (sensor noise, speckle) that zbar reads only after a clean-up.
@Suite("Camera-like pictures")
struct CameraLikeTests {
    /// SplitMix64: a seeded generator, so the noisy pictures are the same on every run.
    struct SeededGenerator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// The Chrome code at 8 px per module (360 × 360), as `qr show --png` draws it.
    private func code() throws -> GrayImage {
        GrayImage(matrix: try QREncoder.encode(fidoURL: Fixtures.chromeURL), moduleSize: 8)
    }

    /// `image` with every pixel changed by `change`, given the pixel and the generator.
    private func noisy(_ image: GrayImage, seed: UInt64, _ change: (UInt8, inout SeededGenerator) -> UInt8) throws -> GrayImage {
        var generator = SeededGenerator(state: seed)
        return try GrayImage(width: image.width, height: image.height, pixels: image.pixels.map { change($0, &generator) })
    }

    @Test("Gaussian sensor noise (σ 40) and 10 % salt-and-pepper speckle: zbar gives up on the picture as it is, the scan reads it after a clean-up")
    func noisePictures() throws {
        let gaussian = try noisy(code(), seed: 40) { pixel, generator in
            // The sum of 12 uniform values in 0..<1, less 6, is close to a standard normal value.
            let normal = (0..<12).reduce(0.0) { sum, _ in sum + Double.random(in: 0..<1, using: &generator) } - 6
            return UInt8(min(max(Double(pixel) + 40 * normal, 0), 255))
        }
        let speckled = try noisy(code(), seed: 10) { pixel, generator in
            guard Double.random(in: 0..<1, using: &generator) < 0.1 else { return pixel }
            return Bool.random(using: &generator) ? 0 : 255
        }
        for picture in [gaussian, speckled] {
            #expect(try ZbarDecoder.decodeOnce(picture).isEmpty, "zbar must not read the picture as it is")
            #expect(try QRScanner.scan(image: picture) == Fixtures.chromeURL)
        }
    }

    @Test("the 3 × 3 median is the median of each neighbourhood; the 2 × 2 downscale is the mean of each block")
    func filters() throws {
        var generator = SeededGenerator(state: 7)
        for _ in 0..<200 {
            let pixels = (0..<9).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
            let image = try GrayImage(width: 3, height: 3, pixels: pixels)
            #expect(image.medianFiltered().pixels[4] == pixels.sorted()[4], "\(pixels)")
        }
        let block = try GrayImage(width: 3, height: 2, pixels: [0, 255, 9, 100, 101, 9])
        #expect(block.halved() == (try GrayImage(width: 1, height: 1, pixels: [114])))
    }
}
