import HybridFiles

/// Whole-file reads and writes for QR images and captures, with the system's reasons in errors.
enum FileBytes {
    /// The largest input file accepted (64 MiB); a QR image or capture is far smaller.
    static let maximumSize = 64 << 20

    /// How long a pipe, socket or device may go without data before the read gives up.
    static let quietLimit = FileReader.quietLimit

    /// Reads the whole file at `path` (``FileReader``: a regular file to its end, a pipe or device
    /// as its data comes, until `quietLimit` passes without any).
    ///
    /// - Throws: ``QRError/Code/fileUnreadable`` with the path and the reason, if the file is larger
    ///   than ``maximumSize``, or if a pipe or device stayed quiet for `quietLimit`.
    /// `-` is standard input (``FileReader``), under the same limits.
    static func read(_ path: String, quietLimit: Duration = quietLimit) throws(QRError) -> [UInt8] {
        do {
            return try FileReader.read(path, maximumSize: maximumSize, quietLimit: quietLimit)
        } catch {
            throw QRError(.fileUnreadable, "\(path == "-" ? "standard input" : path): \(error)")
        }
    }

    /// Writes `bytes` to `path` (``FileWriter/replacePrivately(_:with:)``): a regular file is replaced
    /// by one of mode 0600, since the image of a `FIDO:/` code holds its QR secret; a pipe or device
    /// (`/dev/stdout`) is written to as it is.
    ///
    /// - Throws: ``QRError/Code/writeFailed`` with the path and the reason.
    static func write(_ bytes: [UInt8], to path: String) throws(QRError) {
        do {
            try FileWriter.replacePrivately(path, with: bytes)
        } catch {
            throw QRError(.writeFailed, "\(path): \(error)")
        }
    }
}
