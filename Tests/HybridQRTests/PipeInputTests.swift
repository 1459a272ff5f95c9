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
}
