import Foundation
import HybridCore
import HybridRuntime
import Testing

/// Peers that stop reading, flood pings, or hold connections open cannot make the relay queue
/// without bound or keep sockets forever (Docs/RELAY.md, "Back-pressure and caps").
@Suite("Relay back-pressure, caps and timers", .serialized)
struct RelayBackPressureTests {
    @Test("a ping flood from a client that never reads keeps the relay's memory flat")
    func pingFlood() async throws {
        try await withRelay { relay, endpoint in
            let socket = try StalledSocket(port: endpoint.port)
            defer { socket.close() }
            #expect(socket.send(Array(RawConnection.upgradeRequest(path: TunnelServicePath.new(tunnelID: randomTunnelID()).path).utf8)))
            #expect(RawConnection.status(of: socket.readResponseHead()) == 101)

            // 1 MiB of pings in one buffer (125-byte payloads, masked), sent over and over.
            let ping = RawConnection.frame(opcode: 0x9, payload: [UInt8](repeating: 0x5A, count: 125))
            let batch = Array([[UInt8]](repeating: ping, count: 1 << 20 / ping.count).joined())
            #expect(socket.send(batch))  // warm-up: allocator pools and NIO buffers reach their size
            let before = residentKiB()
            var sent = 0
            for _ in 0..<24 where socket.send(batch) { sent += 1 }
            // The relay reads everything (the socket keeps accepting bytes) but answers almost nothing.
            #expect(sent == 24, "the relay stopped reading a ping flood")
            let grown = residentKiB() - before
            // Before the pong budget every ping queued a pong: 200,000 pongs grow the heap by far more.
            #expect(grown < 12 * 1024, "RSS grew by \(grown) KiB during 24 MiB of pings")
            #expect(relay.openTunnelCount == 1)
        }
    }

    @Test("a peer that stops reading pauses the other peer; its close frame is then dropped within the close timeout")
    func stallThenClose() async throws {
        var configuration = RelayConfiguration()
        configuration.maxMessageSize = 1 << 20
        configuration.closeHandshakeTimeout = .milliseconds(500)
        try await withRelay(configuration) { relay, endpoint in
            let tunnelID = randomTunnelID()
            let creator = try StalledSocket(port: endpoint.port)
            defer { creator.close() }
            #expect(creator.send(Array(RawConnection.upgradeRequest(path: TunnelServicePath.new(tunnelID: tunnelID).path).utf8)))
            let head = creator.readResponseHead()
            #expect(RawConnection.status(of: head) == 101)
            let routingLine = try #require(head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("x-cable-routing-id:") })
            let hex = Array(routingLine.split(separator: ":")[1].trimmingCharacters(in: .whitespaces).utf8)
            let routingID = try #require(
                stride(from: 0, to: hex.count, by: 2).map { UInt8(String(decoding: hex[$0..<$0 + 2], as: UTF8.self), radix: 16) }
                    as [UInt8?]
            ).compactMap { $0 }
            #expect(routingID.count == 3)
            let joiner = try StalledSocket(port: endpoint.port, receiveBuffer: 1 << 20, ioTimeout: 2)
            defer { joiner.close() }
            #expect(joiner.send(Array(RawConnection.upgradeRequest(
                path: TunnelServicePath.connect(routingID: routingID, tunnelID: tunnelID).path).utf8)))
            #expect(RawConnection.status(of: joiner.readResponseHead()) == 101)

            // 16 messages of 1 MiB to a creator that reads nothing: the relay stops taking them
            // from the joiner once the creator's connection is full (the joiner's sends time out).
            let message = Self.maskedBinaryFrame(count: 1 << 20)
            var accepted = 0
            while accepted < 16, joiner.send(message) { accepted += 1 }
            // Not a synchronisation: the joiner's sends already timed out (the relay stopped reading).
            // This second is a window in which a relay without back-pressure would go on taking
            // (and counting) the rest; the check below can only be made stricter by waiting longer.
            try await Task.sleep(for: .seconds(1))
            let relayed = relay.statistics.messagesRelayed
            #expect(relayed < 16, "all \(relayed) MiB were taken from the joiner: no back-pressure")
            #expect(accepted < 16)

            // The stalled creator now closes. The relay's echo cannot be written, but the timer drops it.
            #expect(creator.send(RawConnection.frame(opcode: 0x8, payload: [0x03, 0xE8])))
            let start = ContinuousClock.now
            #expect(await eventually(timeout: .seconds(10)) { relay.statistics.openConnections == 0 })
            #expect(ContinuousClock.now - start < .seconds(10))
            #expect(relay.openTunnelCount == 0)
        }
    }

    /// A masked binary frame with a 64-bit length.
    private static func maskedBinaryFrame(count: Int) -> [UInt8] {
        var out: [UInt8] = [0x82, 0x80 | 127]
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((count >> shift) & 0xFF)) }
        out += [0, 0, 0, 0]  // a zero mask leaves the payload as is
        out += [UInt8](repeating: 0xA5, count: count)
        return out
    }

    @Test("--max-connections: beyond the cap a fast 503 before any parsing; a sign-in still completes in the free slots")
    func connectionCap() async throws {
        var configuration = RelayConfiguration()
        configuration.maxConnections = 40
        configuration.upgradeTimeout = .seconds(60)  // the flood's idle connections stay for the whole test
        try await withHarness(configuration) { harness in
            let port = try #require(harness.relay.endpoint?.port)
            // 38 idle connections hold slots; 2 stay free for the sign-in.
            var held: [RawConnection] = []
            for _ in 0..<38 { held.append(try await RawConnection.connect(port: port)) }
            #expect(await eventually { harness.relay.statistics.openConnections == 38 })

            let account = Account.make("capped")
            let phone = SimulatedPhone(passkeys: [account.passkey])
            _ = try await harness.signIn(on: phone, relyingParty: exampleRP, knownCredentials: [account.credential])
            #expect(await eventually { harness.relay.openTunnelCount == 0 })
            // The sign-in's two connections must be gone too (their closing handshakes may still run):
            // otherwise a slot they free later would let one connection of the flood in.
            #expect(await eventually { harness.relay.statistics.openConnections == 38 })

            // Fill the cap, then flood: every extra connection is answered 503 without a request, as
            // soon as the relay has it (these send nothing: about 1 s after the connect, when the
            // kernel hands them over; deferred accept, Docs/RELAY.md).
            held.append(try await RawConnection.connect(port: port))
            held.append(try await RawConnection.connect(port: port))
            #expect(await eventually { harness.relay.statistics.openConnections == 40 })
            let start = ContinuousClock.now
            var refused = 0
            var extra: [RawConnection] = []
            for _ in 0..<60 { extra.append(try await RawConnection.connect(port: port)) }
            for connection in extra {
                let head = await connection.readResponseHead(timeout: .seconds(5))
                if RawConnection.status(of: head) == 503 { refused += 1 }
                #expect(await connection.waitForClose(timeout: .seconds(5)))
            }
            let elapsed = ContinuousClock.now - start
            #expect(refused == 60)
            #expect(elapsed < .seconds(20), "60 refusals took \(elapsed)")
            #expect(harness.relay.statistics.openConnections == 40)
            #expect((harness.relay.statistics.rejectedRequests[503] ?? 0) >= 60)
            for connection in held + extra { await connection.close() }
            #expect(await eventually { harness.relay.statistics.openConnections == 0 })
        }
    }

    @Test("a web page Origin is refused with 403 by default; native origins pass; --allow-origin lets one in")
    func originPolicy() async throws {
        @Sendable func status(_ endpoint: RelayEndpoint, origin: String?) async -> Int? {
            var request = RawConnection.upgradeRequest(path: TunnelServicePath.new(tunnelID: randomTunnelID()).path)
            if let origin {
                request = request.replacingOccurrences(of: "Host: 127.0.0.1\r\n", with: "Host: 127.0.0.1\r\nOrigin: \(origin)\r\n")
            }
            guard let raw = try? await RawConnection.connect(port: endpoint.port) else { return nil }
            guard (try? await raw.write(request)) != nil else { return nil }
            let head = await raw.readResponseHead()
            await raw.close()
            return RawConnection.status(of: head)
        }
        try await withRelay { relay, endpoint in
            #expect(await status(endpoint, origin: "https://evil.example") == 403)
            #expect(await status(endpoint, origin: "null") == 403)
            #expect(await status(endpoint, origin: "http://127.0.0.1:47001") == 403)
            #expect(await status(endpoint, origin: nil) == 101)
            #expect(await status(endpoint, origin: "wss://cable.ua5v.com") == 101)
            #expect(await status(endpoint, origin: "ws://127.0.0.1:\(endpoint.port)") == 101)
            #expect(relay.statistics.rejectedRequests[403] == 3)
        }
        var configuration = RelayConfiguration()
        configuration.originPolicy = RelayOriginPolicy(allowedOrigins: ["https://App.example"])
        try await withRelay(configuration) { _, endpoint in
            #expect(await status(endpoint, origin: "https://app.example") == 101)
            #expect(await status(endpoint, origin: "https://evil.example") == 403)
        }
    }

    @Test("malformed frames get their close code: RSV bits 1002, 1-byte close body 1002, non-UTF-8 reason 1007")
    func malformedFrames() async throws {
        var configuration = RelayConfiguration()
        configuration.closeHandshakeTimeout = .milliseconds(300)
        try await withRelay(configuration) { relay, endpoint in
            // RSV1 on a binary frame (raw bytes: the client API cannot set reserved bits).
            let raw = try await RawConnection.connect(port: endpoint.port)
            try await raw.write(RawConnection.upgradeRequest(path: TunnelServicePath.new(tunnelID: randomTunnelID()).path))
            #expect(RawConnection.status(of: await raw.readResponseHead()) == 101)
            let headLength = raw.received.count
            var frame = RawConnection.frame(opcode: 0x2, payload: [1, 2, 3])
            frame[0] |= 0x40
            try await raw.write(frame)
            let bytes = await raw.read { !RawConnection.serverFrames(in: Array($0.dropFirst(headLength))).isEmpty }
            let close = RawConnection.serverFrames(in: Array(bytes.dropFirst(headLength))).first
            #expect(close?.opcode == 0x8)
            #expect(close.map { Array($0.payload.prefix(2)) } == [0x03, 0xEA])  // 1002
            await raw.close()

            for (body, expected) in [([UInt8]([0x03]), WebSocketCloseCode.protocolError), ([0x03, 0xE8, 0xFF, 0xFE], .invalidFramePayloadData)] {
                let ends = try await openTunnel(endpoint)
                try await ends.phone.sendFrame(opcode: .connectionClose, data: body)
                let error = await expectRuntimeError(.closed) { _ = try await ends.desktop.receive(timeout: .seconds(3)) }
                #expect(error?.closeCode == expected, "\(body)")
                // The other end is told who broke the protocol.
                #expect(error?.reason.contains("the phone (creator) broke the WebSocket protocol: ") == true, "\(String(describing: error))")
                await ends.close()
            }
            #expect(await eventually { relay.openTunnelCount == 0 })
        }
    }
}
