@testable import HybridRuntime
import NIOCore
import NIOEmbedded
import Synchronization
import Testing

/// `rp`'s and `desktop --web`'s connection cap: the count, the refusal past it, and the memory trim
/// once the server is idle (``ConnectionCap``).
@Suite("Connection cap of the small HTTP servers")
struct ConnectionCapTests {
    @Test("past the cap a connection is refused; the trim runs a second after the last one closed, only if none opened meanwhile")
    func idleTrim() async throws {
        let loop = EmbeddedEventLoop()
        let trims = Mutex(0)
        let cap = ConnectionCap(limit: 2, trim: { trims.withLock { $0 += 1 } })
        let first = EmbeddedChannel(loop: loop)
        let second = EmbeddedChannel(loop: loop)
        #expect(try cap.admit(first))
        #expect(try cap.admit(second))
        #expect(try !cap.admit(EmbeddedChannel(loop: loop)), "a third connection passes a cap of 2")
        #expect(cap.openConnections == 2)

        try await first.close()
        loop.advanceTime(by: .seconds(2))
        #expect(trims.withLock { $0 } == 0, "trimmed while a connection was open")

        try await second.close()
        loop.advanceTime(by: .milliseconds(500))
        #expect(trims.withLock { $0 } == 0, "trimmed before the idle delay")
        loop.advanceTime(by: .milliseconds(500))
        #expect(trims.withLock { $0 } == 1)

        // Idle, then a connection opens within the delay: no trim while it is open.
        let third = EmbeddedChannel(loop: loop)
        #expect(try cap.admit(third))
        try await third.close()
        let fourth = EmbeddedChannel(loop: loop)
        #expect(try cap.admit(fourth))
        loop.advanceTime(by: .seconds(2))
        #expect(trims.withLock { $0 } == 1, "trimmed with a connection open")
        try await fourth.close()
        loop.advanceTime(by: .seconds(1))
        #expect(trims.withLock { $0 } == 2)
        #expect(cap.openConnections == 0)
    }
}
