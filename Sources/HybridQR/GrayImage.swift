/// An 8-bit grayscale bitmap, row-major, one byte per pixel (0 = black, 255 = white).
///
/// The common currency between the renderers, the PNG/PGM readers and the decoder.
public struct GrayImage: Sendable, Hashable {
    /// Width in pixels.
    public let width: Int
    /// Height in pixels.
    public let height: Int
    /// `width × height` luminance values, top row first.
    public let pixels: [UInt8]

    /// The largest image accepted from a file (64 Mpx), to keep a hostile header from asking
    /// for gigabytes of memory.
    public static let maximumPixelCount = 64 << 20

    /// Why an image of `width × height` pixels is not read, or `nil` if it is: it has no pixels, or
    /// more than ``maximumPixelCount`` (the reason names the limit and how far to downscale).
    static func sizeRefusal(width: Int, height: Int) -> String? {
        guard width > 0, height > 0 else { return "the image is \(width)×\(height) pixels: empty" }
        guard width > maximumPixelCount / height else { return nil }
        let fits = (Double(maximumPixelCount) / Double(width) / Double(height)).squareRoot()
        let size = "the image is \(width)×\(height) pixels, more than the \(maximumPixelCount >> 20) Mpx (\(maximumPixelCount) pixels) "
            + "HybridSim reads"
        // Below 1 % no whole percentage fits: no screen or camera makes such an image.
        guard fits >= 0.01 else { return size + ", and too large to be a screen capture or a photo" }
        return size + ": downscale it (a QR code needs only a few pixels per module), e.g. "
            + "convert in.png -resize \(Int(fits * 100))% out.png"
    }

    /// Creates an image from raw pixels.
    ///
    /// - Throws: ``QRError/Code/notAnImage`` if a dimension is not positive, the image is larger
    ///   than ``maximumPixelCount``, or `pixels.count != width * height`.
    public init(width: Int, height: Int, pixels: [UInt8]) throws(QRError) {
        guard width > 0, height > 0 else {
            throw QRError(.notAnImage, "image dimensions \(width)×\(height) are not positive")
        }
        if let refusal = Self.sizeRefusal(width: width, height: height) { throw QRError(.notAnImage, refusal) }
        guard pixels.count == width * height else {
            throw QRError(.notAnImage, "\(width)×\(height) image needs \(width * height) pixels, got \(pixels.count)")
        }
        self.width = width
        self.height = height
        self.pixels = pixels
    }

    /// Renders a QR symbol: black modules on white, `moduleSize` pixels per module, and a light
    /// quiet zone of `quietZone` modules on every side.
    ///
    /// ISO/IEC 18004 asks for a 4-module quiet zone; decoders (and phone cameras pointed at a
    /// busy screen) rely on it to find the finder patterns, so 4 is the default.
    ///
    /// - Parameters:
    ///   - matrix: the symbol.
    ///   - moduleSize: pixels per module, clamped to 1 … 64. zbar needs at least 2.
    ///   - quietZone: light modules around the symbol, clamped to 0 … 64.
    public init(matrix: QRMatrix, moduleSize: Int = 8, quietZone: Int = 4) {
        let scale = min(max(moduleSize, 1), 64)
        let margin = min(max(quietZone, 0), 64)
        let side = (matrix.size + 2 * margin) * scale
        var pixels = [UInt8](repeating: 255, count: side * side)
        pixels.withUnsafeMutableBufferPointer { buffer in
            for y in 0..<matrix.size {
                for x in 0..<matrix.size where matrix[x, y] {
                    Self.fillSquare(buffer, stride: side, left: (x + margin) * scale, top: (y + margin) * scale, side: scale)
                }
            }
        }
        self.width = side
        self.height = side
        self.pixels = pixels
    }

    /// Returns the image with black and white swapped (`255 - value` for every pixel).
    public func inverted() -> GrayImage {
        GrayImage(unchecked: width, height, pixels.map { 255 - $0 })
    }

    /// Blackens a `side × side` square whose top-left pixel is (`left`, `top`).
    static func fillSquare(_ buffer: UnsafeMutableBufferPointer<UInt8>, stride: Int, left: Int, top: Int, side: Int) {
        for row in top..<(top + side) {
            let start = row * stride + left
            for index in start..<(start + side) { buffer[index] = 0 }
        }
    }

    /// Creates an image whose invariants the caller has already established.
    init(unchecked width: Int, _ height: Int, _ pixels: [UInt8]) {
        self.width = width
        self.height = height
        self.pixels = pixels
    }
}
