/// Clean-ups for camera-like pictures (blur, sensor noise, a slight rotation or keystone), which
/// zbar's binarizer gives up on as they are; see ``ZbarDecoder/decode(_:)``.
extension GrayImage {
    /// The image through a 3 × 3 median filter: speckle noise goes, edges stay sharp. The outermost
    /// pixels are kept as they are.
    func medianFiltered() -> GrayImage {
        guard width >= 3, height >= 3 else { return self }
        var out = pixels
        pixels.withUnsafeBufferPointer { source in
            out.withUnsafeMutableBufferPointer { target in
                for y in 1..<(height - 1) {
                    for x in 1..<(width - 1) {
                        let above = (y - 1) * width + x
                        let here = above + width
                        let below = here + width
                        target[here] = Self.median9(
                            source[above - 1], source[above], source[above + 1],
                            source[here - 1], source[here], source[here + 1],
                            source[below - 1], source[below], source[below + 1])
                    }
                }
            }
        }
        return GrayImage(unchecked: width, height, out)
    }

    /// The image at half its width and height, each pixel the mean of a 2 × 2 block: blur and
    /// noise shrink with it, and zbar's binarizer sees sharper edges. `nil` below 2 × 2 pixels.
    func halved() -> GrayImage? {
        let newWidth = width / 2
        let newHeight = height / 2
        guard newWidth > 0, newHeight > 0 else { return nil }
        var out = [UInt8](repeating: 255, count: newWidth * newHeight)
        pixels.withUnsafeBufferPointer { source in
            out.withUnsafeMutableBufferPointer { target in
                for y in 0..<newHeight {
                    let top = 2 * y * width
                    let bottom = top + width
                    for x in 0..<newWidth {
                        let sum = Int(source[top + 2 * x]) + Int(source[top + 2 * x + 1])
                            + Int(source[bottom + 2 * x]) + Int(source[bottom + 2 * x + 1])
                        target[y * newWidth + x] = UInt8((sum + 2) / 4)
                    }
                }
            }
        }
        return GrayImage(unchecked: newWidth, newHeight, out)
    }

    /// The median of nine values by a fixed network of 19 compare-exchanges (Paeth's `opt_med9`).
    private static func median9(
        _ v0: UInt8, _ v1: UInt8, _ v2: UInt8, _ v3: UInt8, _ v4: UInt8, _ v5: UInt8, _ v6: UInt8, _ v7: UInt8, _ v8: UInt8
    ) -> UInt8 {
        var p = (v0, v1, v2, v3, v4, v5, v6, v7, v8)
        func order(_ a: inout UInt8, _ b: inout UInt8) {
            if a > b { swap(&a, &b) }
        }
        order(&p.1, &p.2); order(&p.4, &p.5); order(&p.7, &p.8)
        order(&p.0, &p.1); order(&p.3, &p.4); order(&p.6, &p.7)
        order(&p.1, &p.2); order(&p.4, &p.5); order(&p.7, &p.8)
        order(&p.0, &p.3); order(&p.5, &p.8); order(&p.4, &p.7)
        order(&p.3, &p.6); order(&p.1, &p.4); order(&p.2, &p.5)
        order(&p.4, &p.7); order(&p.4, &p.2); order(&p.6, &p.4)
        order(&p.4, &p.2)
        return p.4
    }
}
