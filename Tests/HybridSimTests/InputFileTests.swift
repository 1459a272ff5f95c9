import Foundation
@testable import HybridSim
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Files the user names (`--options`, `inspect` recordings and key logs), read through the shared
/// `FileReader`: the system's words, a size cap, and no wait without a limit on a pipe.
@Suite("Input files: reasons, size cap, quiet pipes", .timeLimit(.minutes(1)))
struct InputFileTests {
    private func reason(_ path: String, maximumSize: Int = InputFile.maximumSize, quietLimit: Duration = .milliseconds(300)) -> String? {
        do {
            _ = try InputFile.read(path, maximumSize: maximumSize, quietLimit: quietLimit)
            return nil
        } catch {
            return error.reason
        }
    }

    /// Opens `pipe` for writing once its reader has opened it (`ENXIO` until then), within 3 s.
    private func openWriter(_ pipe: String) async throws -> Int32 {
        let deadline = ContinuousClock.now + .seconds(3)
        while true {
            let writer = open(pipe, O_WRONLY | O_NONBLOCK)
            if writer >= 0 || errno != ENXIO || ContinuousClock.now > deadline { return writer }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    @Test("a directory, a missing file and an endless device are refused with one line each")
    func refusals() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        #expect(reason(directory.path) == "it is a directory")
        #expect(reason(directory.file("missing")) == "no such file or directory")
        #expect(reason("/dev/zero", maximumSize: 1 << 20) == "larger than 1 MiB")
        #expect(reason("/dev/zero", maximumSize: 1500) == "larger than 1500 bytes")
        #expect(FileManager.default.createFile(atPath: directory.file("empty.json"), contents: Data()))
        #expect(reason(directory.file("empty.json")) == "it is empty")
    }

    /// A named pipe in a fresh directory, removed after `body`.
    private func withFIFO(_ body: (String) async throws -> Void) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let pipe = directory.file("options.fifo")
        try #require(mkfifo(pipe, 0o600) == 0)
        try await body(pipe)
    }

    @Test("a named pipe nobody opens for writing is an error after the quiet limit, not a wait without end")
    func pipeWithoutWriter() async throws {
        try await withFIFO { pipe in
            let start = ContinuousClock.now
            #expect(reason(pipe) == "no data for 300 ms (a pipe or device nobody writes to?)")
            #expect(ContinuousClock.now - start < .seconds(5))
            #expect(reason(pipe, quietLimit: .milliseconds(-5)) == "no data for 0 s (a pipe or device nobody writes to?)", "a negative limit is no wait, not poll's forever")
        }
    }

    @Test("a pipe whose writer holds it open and never writes (--options <(sleep 100)) is an error after the quiet limit")
    func pipeWithSilentWriter() async throws {
        try await withFIFO { pipe in
            let reading = Task.detached { reason(pipe, quietLimit: .milliseconds(500)) }
            let writer = try await openWriter(pipe)
            #expect(writer >= 0, "\(String(cString: strerror(errno)))")
            defer { if writer >= 0 { close(writer) } }
            #expect(await reading.value == "no data for 500 ms (a pipe or device nobody writes to?)")
        }
    }

    @Test("a pipe whose writer comes after the open and then closes is read whole")
    func pipeWithLateWriter() async throws {
        try await withFIFO { pipe in
            let reading = Task.detached { try InputFile.read(pipe, quietLimit: .seconds(5)) }
            let writer = try await openWriter(pipe)
            try #require(writer >= 0)
            let text = Array(#"{"challenge":"AA"}"#.utf8)
            #expect(text.withUnsafeBytes { write(writer, $0.baseAddress, $0.count) } == text.count)
            close(writer)
            #expect(try await reading.value == text)
        }
    }
}
