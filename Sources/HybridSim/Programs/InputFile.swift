#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a file the user named (an options file, a recording, a key log) with POSIX calls, so a
/// failure is worded by the system ("no such file or directory", "permission denied") instead of
/// Foundation's "The operation could not be completed", and a directory or an endless file such as
/// `/dev/zero` is refused instead of read.
package enum InputFile {
    /// The largest file read (16 MiB): options, recordings and key logs are far smaller.
    package static let maximumSize = 16 << 20

    /// The whole file at `path`.
    ///
    /// - Throws: ``Failure``: one line without the path (the caller names the file).
    package static func read(_ path: String, maximumSize: Int = maximumSize) throws(Failure) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure(reason: systemReason(errno)) }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw Failure(reason: systemReason(errno)) }
        guard status.st_mode & S_IFMT != S_IFDIR else { throw Failure(reason: "it is a directory") }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = chunk.withUnsafeMutableBytes { posixRead(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw Failure(reason: systemReason(errno))
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[..<count])
            guard bytes.count <= maximumSize else {
                throw Failure(reason: "larger than \(maximumSize >> 20) MiB")
            }
        }
    }

    /// Why a file could not be read.
    package struct Failure: Error, CustomStringConvertible {
        /// The reason, lower case, e.g. `no such file or directory`.
        package let reason: String
        package var description: String { reason }
    }

    private static func systemReason(_ code: Int32) -> String { String(cString: strerror(code)).lowercased() }

    private static func posixRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
        #if canImport(Glibc)
        Glibc.read(fd, buffer, count)
        #else
        Darwin.read(fd, buffer, count)
        #endif
    }
}
