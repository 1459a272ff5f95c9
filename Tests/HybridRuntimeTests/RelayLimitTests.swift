import HybridCore
import HybridRuntime
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

    @Test("a tunnel older than its lifetime is closed with 1001")
    func lifetime() async throws {
        var configuration = RelayConfiguration()
        configuration.tunnelLifetime = .seconds(2)
        try await withRelay(configuration) { relay, endpoint in
            let start = ContinuousClock.now
            let ends = try await openTunnel(endpoint)
            // Traffic does not extend the lifetime (best effort: stop once the tunnel is gone).
            for _ in 0..<3 {
                guard (try? await ends.phone.send([1])) != nil,
                    (try? await ends.desktop.receive(timeout: .seconds(1))) != nil
                else { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            await expectBothClosed(ends, with: .goingAway, reasonContains: "lifetime")
            #expect(ContinuousClock.now - start >= .seconds(2))
            await ends.close()
            #expect(await eventually { relay.openTunnelCount == 0 })
        }
    }

    @Test("an idle tunnel is closed with 1001; traffic keeps it open")
    func idle() async throws {
        var configuration = RelayConfiguration()
        configuration.idleTimeout = .milliseconds(1500)
        configuration.maxMessagesPerPeer = 100
        try await withRelay(configuration) { relay, endpoint in
            let ends = try await openTunnel(endpoint)
            let start = ContinuousClock.now
            // Traffic every 100 ms for longer than the idle timeout keeps the tunnel open
            // (a gap would have to stall for 1.4 s to flake).
            while ContinuousClock.now - start < .milliseconds(2000) {
                try await Task.sleep(for: .milliseconds(100))
                try await ends.desktop.send([2])
                _ = try await ends.phone.receive(timeout: .seconds(1))
            }
            let quiet = ContinuousClock.now
            await expectBothClosed(ends, with: .goingAway, reasonContains: "idle")
            #expect(ContinuousClock.now - quiet >= .milliseconds(1400))
            await ends.close()
            #expect(await eventually { relay.openTunnelCount == 0 })
        }
    }

    @Test("a text frame closes the tunnel with 1003")
    func textFrame() async throws {
        try await withRelay { relay, endpoint in
            let ends = try await openTunnel(endpoint)
            try await ends.phone.sendFrame(opcode: .text, data: Array("hello".utf8))
            await expectBothClosed(ends, with: .unsupportedData, reasonContains: "text frames")
            await ends.close()
            #expect(await eventually { relay.openTunnelCount == 0 })
            #expect(relay.statistics.tunnelsClosed[1003] == 1)
        }
    }

    @Test("an unmasked client frame closes the tunnel with 1002")
    func unmaskedFrame() async throws {
        try await withRelay { relay, endpoint in
            let ends = try await openTunnel(endpoint)
            try await ends.desktop.sendFrame(opcode: .binary, data: [1, 2, 3], masked: false)
            await expectBothClosed(ends, with: .protocolError, reasonContains: "masked")
            await ends.close()
            #expect(await eventually { relay.openTunnelCount == 0 })
        }
    }
}
