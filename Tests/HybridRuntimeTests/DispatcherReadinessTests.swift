@testable import HybridRuntime
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The dispatcher's wait set on its own (a `~Copyable` type: each call's result is bound before it
/// is checked): a watched connection is reported once per arming (so a
/// connection handed to a shard never wakes the dispatcher again), the listener whenever it is
/// readable, and the system's refusals come back as errors instead of being lost.
@Suite("Dispatcher readiness")
struct DispatcherReadinessTests {
    /// A connected pair of stream sockets: (one end, the other).
    static func socketPair() throws -> (CInt, CInt) {
        var ends: [CInt] = [0, 0]
        #if canImport(Glibc)
        let made = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends)
        #else
        let made = socketpair(AF_UNIX, SOCK_STREAM, 0, &ends)
        #endif
        try #require(made == 0, "socketpair: errno \(errno)")
        return (ends[0], ends[1])
    }

    @Test("a watched connection is reported once per arming; the listener each time it is readable")
    func oneShot() throws {
        let (listenerEnd, listenerPeer) = try Self.socketPair()
        let (connection, peer) = try Self.socketPair()
        defer { for fd in [listenerEnd, listenerPeer, connection, peer] { close(fd) } }
        var readiness = try DispatcherReadiness(listener: listenerEnd)
        var ready: [CInt] = []

        let armed = readiness.watch(connection, added: false)
        #expect(armed)
        let listenerBeforeWrite = readiness.wait(milliseconds: 0, ready: &ready)
        #expect(listenerBeforeWrite == false)
        #expect(ready.isEmpty, "nothing to read yet")

        var byte: UInt8 = 0x47
        #expect(write(peer, &byte, 1) == 1)
        let listenerAfterWrite = readiness.wait(milliseconds: 1000, ready: &ready)
        #expect(listenerAfterWrite == false)
        #expect(ready == [connection])
        // Still readable (nothing was read), but disarmed: not reported again.
        let listenerWhileDisarmed = readiness.wait(milliseconds: 50, ready: &ready)
        #expect(listenerWhileDisarmed == false)
        #expect(ready.isEmpty, "a reported connection stays quiet until it is armed again")
        // Armed again (the set still holds it): reported again.
        let rearmed = readiness.watch(connection, added: true)
        #expect(rearmed)
        let listenerAfterRearm = readiness.wait(milliseconds: 1000, ready: &ready)
        #expect(listenerAfterRearm == false)
        #expect(ready == [connection])

        // The listener is level-triggered: reported while readable, twice in a row.
        #expect(write(listenerPeer, &byte, 1) == 1)
        let listenerReadable = readiness.wait(milliseconds: 1000, ready: &ready)
        #expect(listenerReadable)
        let listenerStillReadable = readiness.wait(milliseconds: 0, ready: &ready)
        #expect(listenerStillReadable)
        // Left out while accepting pauses, reported again when resumed.
        readiness.watchListener(false)
        let listenerWhilePaused = readiness.wait(milliseconds: 50, ready: &ready)
        #expect(listenerWhilePaused == false)
        readiness.watchListener(true)
        let listenerResumed = readiness.wait(milliseconds: 0, ready: &ready)
        #expect(listenerResumed)
    }

    #if os(Linux)
    @Test("the system's refusals: a set on a bad descriptor throws its errno; a bad connection is not watched")
    func refusals() throws {
        let closed: CInt = -1  // no descriptor (a closed one's number would go to the epoll set itself)
        #expect(throws: DispatcherReadinessError.self) { _ = try DispatcherReadiness(listener: closed) }
        do {
            _ = try DispatcherReadiness(listener: closed)
        } catch {
            #expect(error.errno == EBADF)
        }
        let (listener, peer) = try Self.socketPair()
        defer { close(listener); close(peer) }
        var readiness = try DispatcherReadiness(listener: listener)
        let badWatched = readiness.watch(closed, added: false)
        #expect(badWatched == false)
    }
    #endif
}
