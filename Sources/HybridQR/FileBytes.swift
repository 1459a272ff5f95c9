#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Whole-file reads and writes with POSIX calls, so errors carry `strerror` text.
enum FileBytes {
    /// The largest input file accepted (64 MiB); a QR image or capture is far smaller.
    static let maximumSize = 64 << 20

    /// Reads the whole file at `path`.
    ///
    /// - Throws: ``QRError/Code/fileUnreadable`` with the system's reason, or if the file is
    ///   larger than ``maximumSize``.
    static func read(_ path: String) throws(QRError) -> [UInt8] {
        guard let file = fopen(path, "rb") else {
            throw QRError(.fileUnreadable, "\(path): \(String(cString: strerror(errno)))")
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
            if count > 0 { bytes.append(contentsOf: chunk[..<count]) }
            guard bytes.count <= maximumSize else {
                throw QRError(.fileUnreadable, "\(path): larger than \(maximumSize >> 20) MiB")
            }
            if count < chunk.count {
                if ferror(file) != 0 {
                    throw QRError(.fileUnreadable, "\(path): \(String(cString: strerror(errno)))")
                }
                return bytes
            }
        }
    }

    /// Writes `bytes` to `path`, replacing the file.
    ///
    /// - Throws: ``QRError/Code/writeFailed`` with the system's reason.
    static func write(_ bytes: [UInt8], to path: String) throws(QRError) {
        guard let file = fopen(path, "wb") else {
            throw QRError(.writeFailed, "\(path): \(String(cString: strerror(errno)))")
        }
        let written = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        let closed = fclose(file)
        guard written == bytes.count, closed == 0 else {
            throw QRError(.writeFailed, "\(path): \(String(cString: strerror(errno)))")
        }
    }
}
