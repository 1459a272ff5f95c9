@testable import HybridRuntime
import Testing

/// The in-memory tunnel pair that session drivers are tested over.
@Suite("In-memory tunnel")
struct WebSocketInMemoryTunnelTests {
    @Test("messages arrive in order with their boundaries, both ways")
    func orderedBothWays() async throws {
        let (a, b) = InMemoryTunnel.pair()
        for index in 0..<100 { try await a.send([UInt8(index), 0xFF]) }
        try await b.send([])
        for index in 0..<100 {
            #expect(try await b.receive(timeout: .seconds(1)) == [UInt8(index), 0xFF])
        }
        #expect(try await a.receive(timeout: .seconds(1)) == [])
    }

    @Test("a waiting receive is woken by a send")
    func wakesWaiter() async throws {
        let (a, b) = InMemoryTunnel.pair()
        let waiter = Task { try await b.receive(timeout: .seconds(2)) }
        await b.receiveIsWaiting()
        try await a.send([1, 2, 3])
        #expect(try await waiter.value == [1, 2, 3])
    }

    @Test("close reaches the other end as .closed after the messages sent before it")
    func closePropagates() async throws {
        let (a, b) = InMemoryTunnel.pair()
        try await a.send([9])
        await a.close(code: .policyViolation, reason: "enough")
        #expect(try await b.receive(timeout: .seconds(1)) == [9])
        let error = await expectRuntimeError(.closed) { _ = try await b.receive(timeout: .seconds(1)) }
        #expect(error?.closeCode == .policyViolation)
        #expect(error?.reason.contains("enough") == true)
        await expectRuntimeError(.closed) { try await b.send([1]) }
        await expectRuntimeError(.closed) { try await a.send([1]) }
        await b.close()
    }

    @Test("receive times out with .timeout")
    func timeout() async {
        let (_, b) = InMemoryTunnel.pair()
        await expectRuntimeError(.timeout) { _ = try await b.receive(timeout: .milliseconds(50)) }
    }

    @Test("works through the TunnelTransport protocol")
    func asTransport() async throws {
        let (a, b) = InMemoryTunnel.pair()
        let sender: any TunnelTransport = a
        let receiver: any TunnelTransport = b
        try await sender.send([5])
        #expect(try await receiver.receive(timeout: .seconds(1)) == [5])
        await sender.close()
        let error = await expectRuntimeError(.closed) { _ = try await receiver.receive(timeout: .seconds(1)) }
        #expect(error?.closeCode == .normalClosure)
    }
}
