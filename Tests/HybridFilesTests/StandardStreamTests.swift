import Foundation
@testable import HybridFiles
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Standard output and error that cannot be written: the write fails once, with its reason, and
/// the stream is dropped from then on (no trap, no retry); a full device is named too.
@Suite("StandardStream: a failed stdout or stderr is dropped, not a crash", .timeLimit(.minutes(1)))
struct StandardStreamTests {
    @Test("a pipe whose reader went away: the first write fails with EPIPE, later ones are dropped unwritten")
    func readerGone() throws {
        signal(SIGPIPE, SIG_IGN)  // as hybrid-sim's main does
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { close(ends[1]) }
        let stream = StandardStream(descriptor: ends[1])
        #expect(stream.write("first line\n") == .written)
        close(ends[0])
        #expect(stream.write("second line\n") == .failed(.system(EPIPE)))
        #expect(stream.failure == .system(EPIPE))
        #expect(stream.write("third line\n") == .dropped)
    }

    @Test("a full device: ENOSPC, named 'no space left on device'")
    func fullDevice() throws {
        let fd = open("/dev/full", O_WRONLY)
        try #require(fd >= 0, "/dev/full")
        defer { close(fd) }
        let stream = StandardStream(descriptor: fd)
        #expect(stream.write("x\n") == .failed(.system(ENOSPC)))
        #expect(stream.failure?.description == "no space left on device")
    }

    @Test("queued (standard error): a reader that does not read never blocks the writer's callers; lines past the limit are dropped and counted, in order otherwise")
    func queuedStream() async throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]) }
        // Fill the pipe, so that the stream's first write blocks its writer thread.
        let flags = fcntl(ends[1], F_GETFL)
        _ = fcntl(ends[1], F_SETFL, flags | O_NONBLOCK)
        var filled = 0
        let block = [UInt8](repeating: UInt8(ascii: "."), count: 4096)
        while case let count = write(ends[1], block, block.count), count > 0 { filled += count }
        _ = fcntl(ends[1], F_SETFL, flags)

        let stream = StandardStream(descriptor: ends[1], queued: true, queueLimit: 100)
        let start = ContinuousClock.now
        var outcomes: [StandardStream.Outcome] = []
        for index in 0..<10 { outcomes.append(stream.write("queued line \(index) xxxxx\n")) }
        #expect(ContinuousClock.now - start < .seconds(1), "write(_:) waited for the reader")
        // 20 bytes each: five fit the 100-byte queue, the rest are dropped.
        #expect(outcomes == Array(repeating: .written, count: 5) + Array(repeating: .dropped, count: 5), "\(outcomes)")

        // The reader reads again: what was queued comes out in order, then the note where the
        // dropped lines were, then what follows.
        let reader = Self.readToEnd(ends[0])
        stream.drain()
        #expect(stream.write("after the reader came back\n") == .written)
        stream.drain()
        close(ends[1])
        let text = await reader.value
        #expect(text.utf8.count > filled)
        let lines = text.dropFirst(filled).split(separator: "\n").map(String.init)
        #expect(
            lines == (0..<5).map { "queued line \($0) xxxxx" } + [
                "note: 5 line(s) were dropped here: this stream was not being read and 100 bytes waited", "after the reader came back",
            ], "\(lines)")
    }

    @Test("a stream that follows a queued one (stdout after stderr) writes after what the queued one holds: lines written in turn come out in turn")
    func followsQueued() async throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        let reader = Self.readToEnd(ends[0])
        let queued = StandardStream(descriptor: ends[1], queued: true)
        let direct = StandardStream(descriptor: ends[1], follows: queued)
        for index in 0..<200 {
            queued.write("error \(index)\n")
            direct.write("output \(index)\n")
        }
        queued.drain()
        close(ends[1])
        let lines = (await reader.value).split(separator: "\n").map(String.init)
        close(ends[0])
        // Without the wait, an output line overtook the error line queued just before it.
        #expect(lines == (0..<200).flatMap { ["error \($0)", "output \($0)"] }, "\(lines.prefix(6))")
    }

    /// Reads `fd` (a pipe's read end) until its writers close it, on a thread of its own.
    private static func readToEnd(_ fd: Int32) -> Task<String, Never> {
        Task.detached {
            var text: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while case let count = read(fd, &buffer, buffer.count), count > 0 { text += buffer[..<count] }
            return String(decoding: text, as: UTF8.self)
        }
    }
}
