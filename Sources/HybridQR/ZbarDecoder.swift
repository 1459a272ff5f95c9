import CZbar

/// Finds and decodes QR symbols in a grayscale bitmap with libzbar's C API.
///
/// The bitmap is handed to zbar as a `Y800` (8-bit luminance) image without copying; it is
/// detached again before the zbar image is destroyed, so zbar never frees Swift memory.
package enum ZbarDecoder {
    /// Decodes every QR symbol zbar finds in `image` exactly as given (no retries).
    ///
    /// - Returns: the symbols' texts in zbar's order, duplicates removed; empty if none.
    /// - Throws: ``QRError/Code/libraryFailure`` if zbar cannot be set up or reports an error.
    package static func decodeOnce(_ image: GrayImage) throws(QRError) -> [String] {
        guard let scanner = zbar_image_scanner_create() else {
            throw QRError(.libraryFailure, "zbar_image_scanner_create failed")
        }
        defer { zbar_image_scanner_destroy(scanner) }
        zbar_image_scanner_set_config(scanner, ZBAR_NONE, ZBAR_CFG_ENABLE, 0)
        zbar_image_scanner_set_config(scanner, ZBAR_QRCODE, ZBAR_CFG_ENABLE, 1)
        guard let zImage = zbar_image_create() else {
            throw QRError(.libraryFailure, "zbar_image_create failed")
        }
        defer { zbar_image_destroy(zImage) }
        zbar_image_set_format(zImage, czbar_fourcc_y800())
        zbar_image_set_size(zImage, UInt32(image.width), UInt32(image.height))

        let (status, texts) = image.pixels.withUnsafeBytes { buffer -> (Int32, [String]) in
            zbar_image_set_data(zImage, buffer.baseAddress, UInt(buffer.count), nil)
            defer { zbar_image_set_data(zImage, nil, 0, nil) }  // detach before the buffer goes away
            let status = zbar_scan_image(scanner, zImage)
            var texts: [String] = []
            var symbol = zbar_image_first_symbol(zImage)
            while let current = symbol {
                if zbar_symbol_get_type(current) == ZBAR_QRCODE, let data = zbar_symbol_get_data(current) {
                    let length = Int(zbar_symbol_get_data_length(current))
                    let bytes = UnsafeRawBufferPointer(start: data, count: length)
                    let text = String(decoding: bytes, as: UTF8.self)
                    if !texts.contains(text) { texts.append(text) }
                }
                symbol = zbar_symbol_next(current)
            }
            return (status, texts)
        }
        guard status >= 0 else { throw QRError(.libraryFailure, "zbar_scan_image reported an error") }
        return texts
    }

    /// The largest image (4 Mpx, e.g. 2048 × 2048) that gets the clean-up retries of
    /// ``decode(_:)``: a camera picture of a code is smaller, and on a large image without one the
    /// two extra passes would cost seconds.
    static let maximumCleanupPixels = 4 << 20

    /// Decodes `image`, retrying the way a phone app would when nothing is found: the negative
    /// image (light-on-dark codes), then a 3× nearest-neighbour enlargement of both when the
    /// modules may be too small for zbar (it needs about 2 px per module), then, for an image of at
    /// most ``maximumCleanupPixels``, a 3 × 3 median filter and a 2 × 2 box downscale (a
    /// camera-like picture, blurred and noisy, that zbar's binarizer gives up on as it is).
    ///
    /// - Returns: the texts of the first attempt that finds anything; empty if none does.
    package static func decode(_ image: GrayImage) throws(QRError) -> [String] {
        let texts = try decodeOnce(image)
        if !texts.isEmpty { return texts }
        let negative = try decodeOnce(image.inverted())
        if !negative.isEmpty { return negative }
        if min(image.width, image.height) < 600, let larger = image.enlarged(by: 3) {
            for attempt in [larger, larger.inverted()] {
                let enlarged = try decodeOnce(attempt)
                if !enlarged.isEmpty { return enlarged }
            }
        }
        guard image.width * image.height <= maximumCleanupPixels else { return [] }
        for cleaned in [image.medianFiltered(), image.halved()].compactMap(\.self) {
            let found = try decodeOnce(cleaned)
            if !found.isEmpty { return found }
        }
        return []
    }
}

extension GrayImage {
    /// A nearest-neighbour enlargement by an integer `factor`, or `nil` if it would be too big.
    func enlarged(by factor: Int) -> GrayImage? {
        let newWidth = width * factor
        let newHeight = height * factor
        guard factor > 1, newWidth <= GrayImage.maximumPixelCount / newHeight else { return nil }
        var out = [UInt8](repeating: 255, count: newWidth * newHeight)
        pixels.withUnsafeBufferPointer { source in
            out.withUnsafeMutableBufferPointer { target in
                for y in 0..<newHeight {
                    let from = (y / factor) * width
                    let to = y * newWidth
                    for x in 0..<newWidth { target[to + x] = source[from + x / factor] }
                }
            }
        }
        return GrayImage(unchecked: newWidth, newHeight, out)
    }
}
