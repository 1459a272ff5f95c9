/// Renders a QR symbol as a standalone SVG document, for documentation and web pages.
///
/// The document uses one unit per module: a white background covering the symbol plus its quiet
/// zone, and a single black `<path>` made of one rectangle per horizontal run of dark modules.
/// `width`/`height` set the default display size; the `viewBox` lets the image scale losslessly.
public enum SVGRenderer {
    /// Writes the SVG document for `matrix` to `path` (UTF-8), replacing the file, with mode 0600
    /// (the image of a `FIDO:/` code holds its QR secret).
    ///
    /// - Throws: ``QRError/Code/writeFailed`` with the system's reason.
    public static func write(_ matrix: QRMatrix, toFile path: String, moduleSize: Int = 8, quietZone: Int = 4) throws(QRError) {
        try FileBytes.write(Array(render(matrix, moduleSize: moduleSize, quietZone: quietZone).utf8), to: path)
    }

    /// Returns the SVG text for `matrix`.
    ///
    /// - Parameters:
    ///   - matrix: the symbol.
    ///   - moduleSize: CSS pixels per module for the `width`/`height` attributes, clamped to
    ///     1 … 64 (default 8).
    ///   - quietZone: light margin in modules, clamped to 0 … 64 (default 4, as the standard asks).
    public static func render(_ matrix: QRMatrix, moduleSize: Int = 8, quietZone: Int = 4) -> String {
        let margin = min(max(quietZone, 0), 64)
        let scale = min(max(moduleSize, 1), 64)
        let side = matrix.size + 2 * margin
        var path = ""
        for y in 0..<matrix.size {
            var x = 0
            while x < matrix.size {
                guard matrix[x, y] else {
                    x += 1
                    continue
                }
                let start = x
                while x < matrix.size, matrix[x, y] { x += 1 }
                path += "M\(start + margin) \(y + margin)h\(x - start)v1h-\(x - start)z"
            }
        }
        let pixels = side * scale
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <svg xmlns="http://www.w3.org/2000/svg" width="\(pixels)" height="\(pixels)" \
            viewBox="0 0 \(side) \(side)" shape-rendering="crispEdges">
            <title>QR code, version \(matrix.version)-\(matrix.errorCorrection), \(matrix.size)×\(matrix.size) modules</title>
            <rect width="\(side)" height="\(side)" fill="#fff"/>
            <path fill="#000" d="\(path)"/>
            </svg>

            """
    }
}
