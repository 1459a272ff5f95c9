import Foundation
@testable import HybridQR
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Scanning a file that is not a regular file: a named pipe (`mkfifo`, `<(cmd)`) is read as its data
/// comes, and one nobody writes to is an error after a quiet spell, not a program that waits forever.
@Suite("Scanner: pipes and devices", .timeLimit(.minutes(1)))
struct PipeInputTests {
    private func withFIFO<T>(_ body: (String) async throws -> T) async throws -> T {
        let directory = try Fixtures.makeTemporaryDirectory()
        defer { Fixtures.removeDirectory(directory) }
        let path = directory.appendingPathComponent("qr.fifo").path
        try #require(mkfifo(path, 0o600) == 0)
        return try await body(path)
    }

    @Test("a named pipe nobody writes to fails after the quiet limit with a reason, instead of hanging")
    func silentPipe() async throws {
        try await withFIFO { path in
            let start = ContinuousClock.now
            do {
                _ = try FileBytes.read(path, quietLimit: .milliseconds(300))
                Issue.record("a read of a silent pipe returned")
            } catch let error as QRError {
                #expect(error.code == .fileUnreadable)
                #expect(error.description.hasSuffix("\(path): no data for 300 ms (a pipe or device nobody writes to?)"), "\(error)")
            }
            #expect(ContinuousClock.now - start < .seconds(5))
        }
    }

    @Test("a named pipe whose writer comes later and sends a capture is scanned")
    func pipeWithLateWriter() async throws {
        let url = Fixtures.chromeURL
        let capture = Array(TerminalArt.render(try QREncoder.encode(fidoURL: url)).utf8)
        try await withFIFO { path in
            let writer = Thread {
                usleep(100_000)
                let fd = open(path, O_WRONLY)
                guard fd >= 0 else { return }
                _ = capture.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                close(fd)
            }
            writer.start()
            let scanned = try QRScanner.scan(fileAt: path)
            #expect(scanned == url)
        }
    }

    @Test("a PNG written to a named pipe goes to its reader and leaves the pipe's mode; with no reader it fails at once")
    func pngToPipe() async throws {
        let image = GrayImage(matrix: try QREncoder.encode(fidoURL: Fixtures.chromeURL), moduleSize: 2)
        try await withFIFO { path in
            try #require(chmod(path, 0o644) == 0)
            let start = ContinuousClock.now
            #expect(throws: QRError(.writeFailed)) { try PNGCodec.write(image, toFile: path) }  // nobody reads
            #expect(ContinuousClock.now - start < .seconds(2))
            let received = Task.detached { () -> [UInt8] in
                let fd = open(path, O_RDONLY)
                guard fd >= 0 else { return [] }
                defer { close(fd) }
                var bytes: [UInt8] = []
                var chunk = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                    guard count > 0 else { return bytes }
                    bytes += chunk[..<count]
                }
            }
            // Once the reader has the pipe open, the write goes through.
            var written = false
            for _ in 0..<200 where !written {
                do {
                    try PNGCodec.write(image, toFile: path)
                    written = true
                } catch {
                    try await Task.sleep(for: .milliseconds(10))
                }
            }
            #expect(written)
            #expect(try PNGCodec.decode(await received.value) == image)
            // A pipe (or /dev/null, /dev/stdout) is written to as it is: its mode is not the image's business.
            #expect(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int == 0o644)
        }
    }
}
