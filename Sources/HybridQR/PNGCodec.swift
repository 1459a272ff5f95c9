import CPNG

/// Reads and writes 8-bit grayscale PNG files with libpng's *simplified* API (`png_image`).
///
/// The classic libpng API reports errors with `setjmp`/`longjmp`, which Swift cannot use; the
/// simplified API returns a status and a message instead.
public enum PNGCodec {
    /// The eight bytes every PNG file starts with.
    public static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// Writes `image` to `path` as an 8-bit grayscale PNG, with mode 0600 (the image of a `FIDO:/`
    /// code holds its QR secret).
    ///
    /// - Throws: ``QRError/Code/libraryFailure`` with libpng's message, or
    ///   ``QRError/Code/writeFailed`` with the system's reason.
    public static func write(_ image: GrayImage, toFile path: String) throws(QRError) {
        try FileBytes.write(try encode(image), to: path)
    }

    /// Encodes `image` as an 8-bit grayscale PNG in memory.
    ///
    /// - Throws: ``QRError/Code/libraryFailure`` with libpng's message.
    public static func encode(_ image: GrayImage) throws(QRError) -> [UInt8] {
        var control = header(for: image)
        defer { png_image_free(&control) }
        var size: png_alloc_size_t = 0
        let sized = image.pixels.withUnsafeBytes { buffer in
            png_image_write_to_memory(&control, nil, &size, 0, buffer.baseAddress, Int32(image.width), nil)
        }
        guard sized != 0, size > 0 else { throw QRError(.libraryFailure, "libpng: \(message(of: &control))") }
        var output = [UInt8](repeating: 0, count: Int(size))
        let written = output.withUnsafeMutableBytes { target in
            image.pixels.withUnsafeBytes { buffer in
                png_image_write_to_memory(
                    &control, target.baseAddress, &size, 0, buffer.baseAddress, Int32(image.width), nil)
            }
        }
        guard written != 0 else { throw QRError(.libraryFailure, "libpng: \(message(of: &control))") }
        return Array(output.prefix(Int(size)))
    }

    /// Reads a PNG file of any colour type as 8-bit grayscale (`PNG_FORMAT_GRAY`), compositing
    /// any transparency onto white.
    ///
    /// - Throws: ``QRError/Code/notAnImage`` with libpng's message if the file is not a readable
    ///   PNG (also if it cannot be opened: libpng does not tell the two apart).
    public static func read(fileAt path: String) throws(QRError) -> GrayImage {
        var control = png_image()
        control.version = UInt32(PNG_IMAGE_VERSION)
        guard png_image_begin_read_from_file(&control, path) != 0 else {
            defer { png_image_free(&control) }
            throw QRError(.notAnImage, "\(path): \(damage(&control))")
        }
        return try finishRead(&control, source: path)
    }

    /// Decodes PNG bytes held in memory as 8-bit grayscale, like ``read(fileAt:)``.
    ///
    /// - Throws: ``QRError/Code/notAnImage`` with libpng's message.
    public static func decode(_ bytes: [UInt8]) throws(QRError) -> GrayImage {
        var control = png_image()
        control.version = UInt32(PNG_IMAGE_VERSION)
        // libpng reads from `bytes` until png_image_finish_read returns, so both calls stay
        // inside the closure that keeps the buffer alive.
        let result = bytes.withUnsafeBytes { buffer -> Result<GrayImage, QRError> in
            guard png_image_begin_read_from_memory(&control, buffer.baseAddress, buffer.count) != 0 else {
                defer { png_image_free(&control) }
                return .failure(QRError(.notAnImage, "PNG data: \(damage(&control))"))
            }
            do throws(QRError) {
                return .success(try finishRead(&control, source: "PNG data"))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    // MARK: - Helpers

    /// A `png_image` describing `image` for writing.
    private static func header(for image: GrayImage) -> png_image {
        var control = png_image()
        control.version = UInt32(PNG_IMAGE_VERSION)
        control.width = UInt32(image.width)
        control.height = UInt32(image.height)
        control.format = UInt32(PNG_FORMAT_GRAY)
        return control
    }

    /// Completes a read begun with `png_image_begin_read_*`, always releasing libpng's state.
    private static func finishRead(_ control: inout png_image, source: String) throws(QRError) -> GrayImage {
        let width = Int(control.width)
        let height = Int(control.height)
        if let refusal = GrayImage.sizeRefusal(width: width, height: height) {
            png_image_free(&control)
            throw QRError(.notAnImage, "\(source): \(refusal)")
        }
        control.format = UInt32(PNG_FORMAT_GRAY)
        // With a NULL background libpng composites transparent pixels onto the buffer's
        // existing contents, so pre-fill it with white.
        var pixels = [UInt8](repeating: 255, count: width * height)
        let ok = pixels.withUnsafeMutableBytes { buffer in
            png_image_finish_read(&control, nil, buffer.baseAddress, Int32(width), nil)
        }
        guard ok != 0 else {
            defer { png_image_free(&control) }
            throw QRError(.notAnImage, "\(source): \(damage(&control))")
        }
        return GrayImage(unchecked: width, height, pixels)
    }

    /// libpng's messages when the data ends early: reading a file (`Read Error`), memory, or the
    /// image data itself.
    private static let truncationMessages = ["Read Error", "read beyond end of data", "Not enough image data"]

    /// A failed read in words: the PNG is cut short (libpng ran out of data) or damaged (a bad CRC,
    /// a corrupt chunk or compressed stream), followed by libpng's own message.
    private static func damage(_ control: inout png_image) -> String {
        let detail = message(of: &control)
        let cut = truncationMessages.contains { detail.contains($0) }
        return (cut ? "the PNG is cut short (its data ends early: an incomplete download or copy)" : "the PNG is damaged")
            + "; libpng: \(detail)"
    }

    /// libpng's NUL-terminated `message[64]` as a Swift string.
    private static func message(of control: inout png_image) -> String {
        let text = withUnsafeBytes(of: &control.message) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        return text.isEmpty ? "libpng failed without a message" : text
    }
}
