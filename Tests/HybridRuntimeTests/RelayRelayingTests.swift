import HybridCore
import HybridRuntime
import Synchronization
import Testing

/// Messages through the relay: verbatim, ordered, buffered, fragmented, tampered with on purpose.
@Suite("Relay message forwarding")
struct RelayRelayingTests {
    @Test("messages are relayed verbatim both ways, including empty and all byte values")
    func verbatimBothWays() async throws {
        try await withRelay { relay, endpoint in
            let ends = try await openTunnel(endpoint)
            let messages: [[UInt8]] = [[], Array(0...255), [0x00], Array(repeating: 0xAB, count: 5000)]
            for message in messages {
                try await ends.phone.send(message)
                #expect(try await ends.desktop.receive(timeout: .seconds(2)) == message)
                try await ends.desktop.send(message.reversed())
                #expect(try await ends.phone.receive(timeout: .seconds(2)) == message.reversed())
            }
            #expect(await eventually { relay.statistics.messagesRelayed == 2 * messages.count })
            await ends.close()
            #expect(await eventually { relay.openTunnelCount == 0 })
        }
    }

    @Test("order is preserved when both sides send bursts")
    func orderPreserved() async throws {
        try await withRelay { _, endpoint in
            let ends = try await openTunnel(endpoint)
            for index in 0..<16 {
                try await ends.phone.send([0x50, UInt8(index)])
                try await ends.desktop.send([0x44, UInt8(index)])
            }
            for index in 0..<16 {
                #expect(try await ends.desktop.receive(timeout: .seconds(2)) == [0x50, UInt8(index)])
                #expect(try await ends.phone.receive(timeout: .seconds(2)) == [0x44, UInt8(index)])
            }
            await ends.close()
        }
    }

    @Test("messages that arrive in one read (one TCP write) are all relayed, whole and in order")
    func oneReadManyMessages() async throws {
        var configuration = RelayConfiguration()
        configuration.maxMessagesPerPeer = 64
        try await withRelay(configuration) { relay, endpoint in
            let tunnelID = randomTunnelID()
            let phone = try await WebSocketTunnel.open(url: endpoint.url + TunnelServicePath.new(tunnelID: tunnelID).path)
            let routingID = try #require(phone.routingID)
            let raw = try await RawConnection.connect(port: endpoint.port)
            try await raw.write(RawConnection.upgradeRequest(path: TunnelServicePath.connect(routingID: routingID, tunnelID: tunnelID).path))
            #expect(RawConnection.status(of: await raw.readResponseHead()) == 101)
            // Twenty whole messages and one in three fragments, in a single write: the relay reads
            // them in one burst and flushes the other side once, at the burst's end.
            var burst: [UInt8] = []
            for index in 0..<20 { burst += RawConnection.frame(opcode: 0x2, payload: [0x42, UInt8(index)]) }
            burst += RawConnection.frame(opcode: 0x2, payload: [7], fin: false)
            burst += RawConnection.frame(opcode: 0x0, payload: [8], fin: false)
            burst += RawConnection.frame(opcode: 0x0, payload: [9])
            try await raw.write(burst)
            for index in 0..<20 {
                #expect(try await phone.receive(timeout: .seconds(2)) == [0x42, UInt8(index)])
            }
            #expect(try await phone.receive(timeout: .seconds(2)) == [7, 8, 9])
            #expect(await eventually { relay.statistics.messagesRelayed == 21 })
            // And the other way, after the burst.
            try await phone.send([1])
            let head = await raw.readResponseHead()
            let frames = await raw.read { bytes in
                RawConnection.serverFrames(in: Array(bytes.dropFirst(head.utf8.count + 4))).count == 1
            }
            #expect(RawConnection.serverFrames(in: Array(frames.dropFirst(head.utf8.count + 4))).first?.payload == [1])
            await raw.close()
            await phone.close()
        }
    }

    @Test("messages sent before the peer joins are buffered and delivered in order")
    func bufferedUntilJoin() async throws {
        try await withRelay { relay, endpoint in
            let tunnelID = randomTunnelID()
            let phone = try await WebSocketTunnel.open(
                url: endpoint.url + TunnelServicePath.new(tunnelID: tunnelID).path
            )
            for index in 0..<3 { try await phone.send([UInt8(index), 0xEE]) }
            #expect(await eventually { relay.statistics.messagesBuffered == 3 })
            #expect(relay.statistics.messagesRelayed == 0, "held, not yet relayed")
            let routingID = try #require(phone.routingID)
            let desktop = try await WebSocketTunnel.open(
                url: endpoint.url + TunnelServicePath.connect(routingID: routingID, tunnelID: tunnelID).path
            )
            for index in 0..<3 {
                #expect(try await desktop.receive(timeout: .seconds(2)) == [UInt8(index), 0xEE])
            }
            #expect(relay.statistics.messagesRelayed == 3 && relay.statistics.bytesRelayed == 6)
            try await desktop.send([9])
            #expect(try await phone.receive(timeout: .seconds(2)) == [9])
            await phone.close()
            await desktop.close()
        }
    }

    @Test("a fragmented message is reassembled into one message")
    func fragmentsReassembled() async throws {
        try await withRelay { _, endpoint in
            let ends = try await openTunnel(endpoint)
            try await ends.phone.sendFrame(opcode: .binary, data: [1, 2], fin: false)
            try await ends.phone.sendFrame(opcode: .continuation, data: [3], fin: false)
            try await ends.phone.sendFrame(opcode: .continuation, data: [4, 5], fin: true)
            #expect(try await ends.desktop.receive(timeout: .seconds(2)) == [1, 2, 3, 4, 5])
            await ends.close()
        }
    }

    @Test("pings are answered with a pong carrying the same data")
    func pingPong() async throws {
        try await withRelay { _, endpoint in
            let raw = try await RawConnection.connect(port: endpoint.port)
            try await raw.write(
                RawConnection.upgradeRequest(path: TunnelServicePath.new(tunnelID: randomTunnelID()).path)
            )
            #expect(RawConnection.status(of: await raw.readResponseHead()) == 101)
            let headLength = raw.received.count
            try await raw.write(RawConnection.frame(opcode: 0x9, payload: [7, 7, 7]))
            let bytes = await raw.read { bytes in
                !RawConnection.serverFrames(in: Array(bytes.dropFirst(headLength))).isEmpty
            }
            let frames = RawConnection.serverFrames(in: Array(bytes.dropFirst(headLength)))
            #expect(frames.first?.opcode == 0xA)
            #expect(frames.first?.payload == [7, 7, 7])
            await raw.close()
        }
    }

    @Test("the fault hook can flip a byte in transit, per direction")
    func faultInjection() async throws {
        var configuration = RelayConfiguration()
        configuration.faultInjector = { direction, message in
            if direction == .creatorToJoiner, !message.isEmpty { message[0] ^= 0x01 }
        }
        try await withRelay(configuration) { _, endpoint in
            let ends = try await openTunnel(endpoint)
            try await ends.phone.send([0x10, 0x20])
            #expect(try await ends.desktop.receive(timeout: .seconds(2)) == [0x11, 0x20])
            try await ends.desktop.send([0x10, 0x20])
            #expect(try await ends.phone.receive(timeout: .seconds(2)) == [0x10, 0x20])
            await ends.close()
        }
    }

    @Test("the message observer sees every relayed message in order, with its direction, as delivered")
    func messageObserver() async throws {
        let seen = LockedBox<[(RelayDirection, [UInt8])]>([])
        var configuration = RelayConfiguration()
        configuration.faultInjector = { direction, message in
            if direction == .joinerToCreator { message[0] ^= 0xFF }
        }
        configuration.messageObserver = { direction, message in seen.update { $0.append((direction, message)) } }
        try await withRelay(configuration) { _, endpoint in
            let ends = try await openTunnel(endpoint)
            try await ends.phone.send([1])
            #expect(try await ends.desktop.receive(timeout: .seconds(2)) == [1])
            try await ends.desktop.send([2, 3])
            #expect(try await ends.phone.receive(timeout: .seconds(2)) == [0xFD, 3])
            try await ends.phone.send([4])
            #expect(try await ends.desktop.receive(timeout: .seconds(2)) == [4])
            await ends.close()
        }
        let log = seen.value
        #expect(log.map(\.0) == [.creatorToJoiner, .joinerToCreator, .creatorToJoiner])
        // The observer sees the bytes the recipient got (after the fault hook).
        #expect(log.map(\.1) == [[1], [0xFD, 3], [4]])
    }

    @Test("a peer's close code and reason reach the other peer")
    func closePropagates() async throws {
        try await withRelay { relay, endpoint in
            let ends = try await openTunnel(endpoint)
            try await ends.desktop.send([0x00])
            await ends.desktop.close(code: WebSocketCloseCode(rawValue: 4001), reason: "done here")
            // The message sent before the close still arrives first.
            #expect(try await ends.phone.receive(timeout: .seconds(2)) == [0x00])
            let error = await expectRuntimeError(.closed) { _ = try await ends.phone.receive(timeout: .seconds(2)) }
            #expect(error?.closeCode?.rawValue == 4001)
            #expect(error?.reason.contains("done here") == true)
            // Sending on a closed tunnel fails with the same error.
            await expectRuntimeError(.closed) { try await ends.phone.send([1]) }
            await ends.phone.close()
            #expect(await eventually { relay.openTunnelCount == 0 && relay.statistics.openConnections == 0 })
        }
    }

    @Test("a normal close reaches the other peer as 1000")
    func normalClose() async throws {
        try await withRelay { _, endpoint in
            let ends = try await openTunnel(endpoint)
            await ends.phone.close()
            let error = await expectRuntimeError(.closed) { _ = try await ends.desktop.receive(timeout: .seconds(2)) }
            #expect(error?.closeCode == .normalClosure)
            await ends.desktop.close()
        }
    }

    @Test("a peer dropping its TCP connection closes the other side with 1001")
    func peerVanishes() async throws {
        try await withRelay { relay, endpoint in
            let raw = try await RawConnection.connect(port: endpoint.port)
            let tunnelID = randomTunnelID()
            try await raw.write(RawConnection.upgradeRequest(path: TunnelServicePath.new(tunnelID: tunnelID).path))
            let head = await raw.readResponseHead()
            let line = try #require(
                head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("x-cable-routing-id") }
            )
            let routingHex = line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)
            let desktop = try await WebSocketTunnel.open(
                url: endpoint.url + "/cable/connect/\(routingHex)/\(upperHex(tunnelID))"
            )
            await raw.close()
            let error = await expectRuntimeError(.closed) { _ = try await desktop.receive(timeout: .seconds(2)) }
            #expect(error?.closeCode == .goingAway)
            await desktop.close()
            #expect(await eventually { relay.openTunnelCount == 0 })
        }
    }
}
