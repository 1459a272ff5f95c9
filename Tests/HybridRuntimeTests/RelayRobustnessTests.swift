import HybridCore
import HybridRuntime
import HybridTestSupport
import Testing

/// Bad input must never crash the relay or leave it unusable.
@Suite("Relay robustness")
struct RelayRobustnessTests {
    @Test("a frame announcing 2^63 bytes closes the tunnel with 1009")
    func hugeLengthField() async throws {
        var configuration = RelayConfiguration()
        configuration.closeHandshakeTimeout = .milliseconds(200)  // the raw peer never answers
        try await withRelay(configuration) { relay, endpoint in
            let raw = try await RawConnection.connect(port: endpoint.port)
            try await raw.write(
                RawConnection.upgradeRequest(path: TunnelServicePath.new(tunnelID: randomTunnelID()).path)
            )
            #expect(RawConnection.status(of: await raw.readResponseHead()) == 101)
            let headLength = raw.received.count
            try await raw.write([0x82, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3, 4])
            let bytes = await raw.read { bytes in
                !RawConnection.serverFrames(in: Array(bytes.dropFirst(headLength))).isEmpty
            }
            let frame = RawConnection.serverFrames(in: Array(bytes.dropFirst(headLength))).first
            #expect(frame?.opcode == 0x8)
            #expect(frame.map { Array($0.payload.prefix(2)) } == [0x03, 0xF1])  // 1009
            #expect(await raw.waitForClose())
            #expect(await eventually { relay.openTunnelCount == 0 })
        }
    }

    @Test("random garbage before and after the upgrade never breaks the relay")
    func garbage() async throws {
        var configuration = RelayConfiguration()
        configuration.upgradeTimeout = .milliseconds(300)
        configuration.closeHandshakeTimeout = .milliseconds(200)
        try await withRelay(configuration) { relay, endpoint in
            var generator = SeededGenerator(seed: 0x5EED)  // HybridTestSupport: reproducible
            var connections: [RawConnection] = []
            for round in 0..<40 {
                let raw = try await RawConnection.connect(port: endpoint.port)
                if round % 2 == 1 {
                    let path = TunnelServicePath.new(tunnelID: randomTunnelID()).path
                    try await raw.write(RawConnection.upgradeRequest(path: path))
                    _ = await raw.readResponseHead()
                }
                let length = Int.random(in: 1...300, using: &generator)
                let garbage = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
                try? await raw.write(garbage)
                connections.append(raw)
            }
            // The relay still does its job.
            let ends = try await openTunnel(endpoint)
            try await ends.phone.send([1])
            #expect(try await ends.desktop.receive(timeout: .seconds(2)) == [1])
            await ends.close()
            for raw in connections { await raw.close() }
            #expect(await eventually { relay.statistics.openConnections == 0 && relay.openTunnelCount == 0 })
        }
    }

    @Test("a close frame with a reserved code is answered as a protocol error")
    func reservedCloseCode() async throws {
        try await withRelay { _, endpoint in
            let ends = try await openTunnel(endpoint)
            try await ends.phone.sendFrame(opcode: .connectionClose, data: [0x03, 0xED])  // 1005: never sent
            let error = await expectRuntimeError(.closed) { _ = try await ends.desktop.receive(timeout: .seconds(2)) }
            #expect(error?.closeCode == .protocolError)
            await ends.close()
        }
    }
}
