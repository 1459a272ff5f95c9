import HybridCore
@testable import HybridRuntime
import Synchronization
import Testing

/// Every relay limit, and the close code both peers see when it is hit.
@Suite("Relay limits and close codes")
struct RelayLimitTests {
    /// Both ends must see `.closed` with `code` (after draining what was already relayed).
    private func expectBothClosed(
        _ ends: TunnelEnds,
        with code: WebSocketCloseCode,
        reasonContains fragment: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        for end in [ends.phone, ends.desktop] {
            var error: RuntimeError?
            for _ in 0..<64 {
                do {
                    _ = try await end.receive(timeout: .seconds(3))
                } catch let caught as RuntimeError {
                    error = caught
                    break
                } catch {
                    break
                }
            }
            #expect(error?.code == .closed, "\(String(describing: error))", sourceLocation: sourceLocation)
            #expect(error?.closeCode == code, "\(String(describing: error))", sourceLocation: sourceLocation)
            #expect(
                error?.reason.contains(fragment) == true,
                "\(String(describing: error))",
                sourceLocation: sourceLocation
            )
        }
    }

    @Test("a message of exactly maxMessageSize passes; one byte more closes with 1009")
    func messageSize() async throws {
        var configuration = RelayConfiguration()
        configuration.maxMessageSize = 1000
        try await withRelay(configuration) { relay, endpoint in
            let ends = try await openTunnel(endpoint)
            try await ends.phone.send(Array(repeating: 1, count: 1000))
            #expect(try await ends.desktop.receive(timeout: .seconds(2)).count == 1000)
            try await ends.phone.send(Array(repeating: 2, count: 1001))
            await expectBothClosed(ends, with: .messageTooBig, reasonContains: "1000 bytes")
            await ends.close()
            #expect(await eventually { relay.openTunnelCount == 0 })
            #expect(relay.statistics.tunnelsClosed[1009] == 1)
        }
    }

    @Test("fragments adding up to more than maxMessageSize close with 1009")
    func fragmentedMessageSize() async throws {
        var configuration = RelayConfiguration()
        configuration.maxMessageSize = 1000
        try await withRelay(configuration) { relay, endpoint in
            let ends = try await openTunnel(endpoint)
            try await ends.desktop.sendFrame(opcode: .binary, data: Array(repeating: 1, count: 600), fin: false)
            try await ends.desktop.sendFrame(opcode: .continuation, data: Array(repeating: 1, count: 600), fin: true)
            await expectBothClosed(ends, with: .messageTooBig, reasonContains: "1000 bytes")
            await ends.close()
            #expect(await eventually { relay.openTunnelCount == 0 })
        }
    }

    @Test("a message in more than 256 fragments closes with 1009 naming the fragments, not the size")
    func tooManyFragments() async throws {
        try await withRelay { relay, endpoint in
            let ends = try await openTunnel(endpoint)
            try await ends.desktop.sendFrame(opcode: .binary, data: [1], fin: false)
            // The relay closes the tunnel at the 257th; sending on after it may fail.
            for _ in 0..<300 { try? await ends.desktop.sendFrame(opcode: .continuation, data: [1], fin: false) }
            await expectBothClosed(ends, with: .messageTooBig, reasonContains: "more than 256 fragments")
            await ends.close()
            #expect(await eventually { relay.openTunnelCount == 0 })
        }
    }

    @Test("message maxMessagesPerPeer + 1 from one peer closes with 1008; the first ones arrive")
    func messageCount() async throws {
        var configuration = RelayConfiguration()
        configuration.maxMessagesPerPeer = 5
        try await withRelay(configuration) { relay, endpoint in
            let ends = try await openTunnel(endpoint)
            for index in 0..<6 { try await ends.phone.send([UInt8(index)]) }
            for index in 0..<5 {
                #expect(try await ends.desktop.receive(timeout: .seconds(2)) == [UInt8(index)])
            }
            await expectBothClosed(ends, with: .policyViolation, reasonContains: "more than 5 messages")
            await ends.close()
            #expect(await eventually { relay.openTunnelCount == 0 })
        }
    }

    @Test("buffered messages count too: the limit bounds the buffer")
    func bufferBounded() async throws {
        var configuration = RelayConfiguration()
        configuration.maxMessagesPerPeer = 3
        try await withRelay(configuration) { relay, endpoint in
            let phone = try await WebSocketTunnel.open(
                url: endpoint.url + TunnelServicePath.new(tunnelID: randomTunnelID()).path
            )
            for index in 0..<4 { try? await phone.send([UInt8(index)]) }
            let error = await expectRuntimeError(.closed) { _ = try await phone.receive(timeout: .seconds(2)) }
            #expect(error?.closeCode == .policyViolation)
            #expect(relay.statistics.messagesBuffered == 3)
            await phone.close()
            #expect(await eventually { relay.openTunnelCount == 0 })
        }
    }

    @Test("bytes held for a side that has not joined are bounded (1008, the reason names it); held messages count as relayed only once delivered")
    func bytesBeforeJoinBounded() async throws {
        var configuration = RelayConfiguration()
        configuration.maxBytesBeforeJoin = 100
        let observed = Atomic<Int>(0)
        configuration.messageObserver = { _, _ in observed.add(1, ordering: .relaxed) }
        try await withRelay(configuration) { relay, endpoint in
            let phone = try await WebSocketTunnel.open(
                url: endpoint.url + TunnelServicePath.new(tunnelID: randomTunnelID()).path
            )
            try await phone.send([UInt8](repeating: 1, count: 81))  // a handshake message's size
            try await phone.send([UInt8](repeating: 2, count: 19))  // 100: still within
            #expect(await eventually { relay.statistics.messagesBuffered == 2 })
            #expect(relay.statistics.messagesRelayed == 0, "nothing delivered yet")
            try? await phone.send([3])
            let error = await expectRuntimeError(.closed) { _ = try await phone.receive(timeout: .seconds(2)) }
            #expect(error?.closeCode == .policyViolation)
            #expect(
                error?.description.contains("more than 100 bytes from the phone (creator) before the desktop (joiner) joined")
                    == true, "\(String(describing: error))")
            #expect(relay.statistics.messagesRelayed == 0 && relay.statistics.bytesRelayed == 0, "never delivered: not relayed")
            #expect(observed.load(ordering: .relaxed) == 2, "the refused message reached no hook (observer, recorder)")
            await phone.close()
            #expect(await eventually { relay.openTunnelCount == 0 })
        }
    }

    /// One message each way; both arrive, so the tunnel is open and the relay has seen activity.
    private func exchange(_ ends: TunnelEnds, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await ends.phone.send([1])
        #expect(try await ends.desktop.receive(timeout: .seconds(5)) == [1], sourceLocation: sourceLocation)
        try await ends.desktop.send([2])
        #expect(try await ends.phone.receive(timeout: .seconds(5)) == [2], sourceLocation: sourceLocation)
    }

    /// Advances `clock` to one nanosecond before `remaining` (the tunnel is still open), then to
    /// `remaining`: both peers get 1001 with `reason`, no timer is left, the statistics count it.
    private func expectClosedExactly(
        after remaining: Duration,
        on clock: ManualRelayClock,
        _ relay: TunnelRelay,
        _ ends: TunnelEnds,
        reasonContains reason: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        try await clock.advance(by: remaining - .nanoseconds(1))
        #expect(relay.openTunnelCount == 1, sourceLocation: sourceLocation)
        try await clock.advance(by: .nanoseconds(1))
        await expectBothClosed(ends, with: .goingAway, reasonContains: reason, sourceLocation: sourceLocation)
        // Closing left no timer behind.
        #expect(clock.pendingTimers == 0, sourceLocation: sourceLocation)
        await ends.close()
        #expect(await eventually { relay.openTunnelCount == 0 }, sourceLocation: sourceLocation)
        #expect(relay.statistics.tunnelsClosed[1001] == 1, sourceLocation: sourceLocation)
    }

    /// A manual clock and a configuration whose timers run on it, with `idleTimeout` and `tunnelLifetime`.
    private func onManualClock(idle: Duration, lifetime: Duration) -> (ManualRelayClock, RelayConfiguration) {
        let clock = ManualRelayClock()
        var configuration = RelayConfiguration()
        configuration.clock = .manual(clock)
        configuration.idleTimeout = idle
        configuration.tunnelLifetime = lifetime
        return (clock, configuration)
    }

    // The timer tests below run on a manual clock: time moves only when the test advances it, and
    // `advance(by:)` returns once every timer due by then has run on the tunnel's event loop. So
    // there is no sleep and no wall-clock measure; the only waits are for the sockets, with timeouts.

    @Test("a tunnel is closed with 1001 exactly at its lifetime; traffic does not extend it")
    func lifetime() async throws {
        let (clock, configuration) = onManualClock(idle: .seconds(60), lifetime: .seconds(10))
        try await withRelay(configuration) { relay, endpoint in
            let ends = try await openTunnel(endpoint)
            // The tunnel's one timer (lifetime and idle) was started when /cable/new was accepted.
            #expect(clock.pendingTimers == 1)
            try await exchange(ends)
            try await clock.advance(by: .seconds(5))
            try await exchange(ends)
            try await clock.advance(by: .seconds(4))
            try await exchange(ends)
            // 9 s in, just after traffic: the lifetime still ends at 10 s.
            try await expectClosedExactly(after: .seconds(1), on: clock, relay, ends, reasonContains: "lifetime of 10 s expired")
        }
    }

    @Test("an idle tunnel is closed with 1001 exactly idleTimeout after its last message; traffic resets it")
    func idle() async throws {
        let (clock, onClock) = onManualClock(idle: .seconds(10), lifetime: .seconds(120))
        var configuration = onClock
        configuration.maxMessagesPerPeer = 100
        try await withRelay(configuration) { relay, endpoint in
            let ends = try await openTunnel(endpoint)
            // Traffic every 9 s for 36 s, four times the idle timeout: the tunnel stays open.
            for _ in 0..<4 {
                try await clock.advance(by: .seconds(9))
                try await exchange(ends)
            }
            #expect(relay.openTunnelCount == 1)
            // Quiet from now on: closed exactly 10 s after the last message.
            try await expectClosedExactly(after: .seconds(10), on: clock, relay, ends, reasonContains: "idle for 10 s")
        }
    }

    @Test("an idle tunnel nobody joined is closed with 1001 at the idle timeout")
    func idleUnjoined() async throws {
        let (clock, configuration) = onManualClock(idle: .seconds(10), lifetime: .seconds(120))
        try await withRelay(configuration) { relay, endpoint in
            let phone = try await WebSocketTunnel.open(
                url: endpoint.url + TunnelServicePath.new(tunnelID: randomTunnelID()).path
            )
            try await clock.advance(by: .seconds(10) - .nanoseconds(1))
            #expect(relay.openTunnelCount == 1)
            try await clock.advance(by: .nanoseconds(1))
            let error = await expectRuntimeError(.closed) { _ = try await phone.receive(timeout: .seconds(5)) }
            #expect(error?.closeCode == .goingAway)
            #expect(error?.reason.contains("idle") == true)
            await phone.close()
            #expect(await eventually { relay.openTunnelCount == 0 })
        }
    }

    @Test("a text frame closes the tunnel with 1003, naming the side that sent it")
    func textFrame() async throws {
        try await withRelay { relay, endpoint in
            let ends = try await openTunnel(endpoint)
            try await ends.phone.sendFrame(opcode: .text, data: Array("hello".utf8))
            await expectBothClosed(ends, with: .unsupportedData, reasonContains: "the phone (creator) sent a text frame")
            await ends.close()
            #expect(await eventually { relay.openTunnelCount == 0 })
            #expect(relay.statistics.tunnelsClosed[1003] == 1)
        }
    }

    @Test("an unmasked client frame closes the tunnel with 1002, naming the side that sent it (the other reads the reason too)")
    func unmaskedFrame() async throws {
        try await withRelay { relay, endpoint in
            let ends = try await openTunnel(endpoint)
            try await ends.desktop.sendFrame(opcode: .binary, data: [1, 2, 3], masked: false)
            await expectBothClosed(ends, with: .protocolError, reasonContains: "the desktop (joiner) broke the WebSocket protocol: client frames must be masked")
            await ends.close()
            #expect(await eventually { relay.openTunnelCount == 0 })
        }
    }

    @Test("close reasons name the device with the relay's word for its side: the phone creates a QR tunnel, the desktop a linked one")
    func sideNames() {
        #expect(RelayTunnel.name(.creator, flow: .qr) == "the phone (creator)")
        #expect(RelayTunnel.name(.joiner, flow: .qr) == "the desktop (joiner)")
        #expect(RelayTunnel.name(.creator, flow: .linked) == "the desktop (creator)")
        #expect(RelayTunnel.name(.joiner, flow: .linked) == "the phone (joiner)")
    }
}
