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
}
