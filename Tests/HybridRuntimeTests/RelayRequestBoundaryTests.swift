import HybridCore
@testable import HybridRuntime
import Testing

/// How a request arrives: dribbled before the dispatcher can route it (looked at with a backing-off
/// recheck, not in a spin), and what a client sends behind its upgrade request in the same write (a
/// second HTTP request is dropped: the relay answers one request per connection; WebSocket frames
/// reach the tunnel). The pipelined request once aborted the relay process (fuzzing;
/// Tests/Fuzz/Regressions/relay-request).
@Suite("Relay request boundary")
struct RelayRequestBoundaryTests {
    /// An upgrade request without `Connection: Upgrade`: NIO's HTTP parser does not stop after it,
    /// so a request behind it is parsed too (the fuzzer's input had a mangled header name).
    static func upgradeWithoutConnectionHeader(path: String) -> String {
        RawConnection.upgradeRequest(path: path).replacingOccurrences(of: "Connection: Upgrade\r\n", with: "")
    }

    static let secondRequest = "GET /cable/connect/AAAAAA/AAAA HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

    @Test("a request pipelined behind an upgrade request without Connection: Upgrade is dropped; the relay lives on")
    func pipelinedWithoutConnectionHeader() async throws {
        var configuration = RelayConfiguration()
        configuration.closeHandshakeTimeout = .milliseconds(200)
        try await withRelay(configuration) { relay, endpoint in
            let raw = try await RawConnection.connect(port: endpoint.port)
            let path = TunnelServicePath.new(tunnelID: randomTunnelID()).path
            try await raw.write(Self.upgradeWithoutConnectionHeader(path: path) + Self.secondRequest)
            let head = await raw.readResponseHead()
            #expect(RawConnection.status(of: head) == 101)
            // Nothing of the second request reached the WebSocket side: no close frame, no answer.
            let headLength = raw.received.count
            try await raw.write(RawConnection.frame(opcode: 0x9, payload: [7]))  // a ping
            let bytes = await raw.read { bytes in
                !RawConnection.serverFrames(in: Array(bytes.dropFirst(headLength))).isEmpty
            }
            let frames = RawConnection.serverFrames(in: Array(bytes.dropFirst(headLength)))
            #expect(frames.first?.opcode == 0xA && frames.first?.payload == [7])  // its pong
            await raw.close()
            // The relay still relays.
            let ends = try await openTunnel(endpoint)
            try await ends.phone.send([1, 2])
            #expect(try await ends.desktop.receive(timeout: .seconds(2)) == [1, 2])
            await ends.close()
            #expect(await eventually { relay.statistics.openConnections == 0 && relay.openTunnelCount == 0 })
        }
    }

    @Test(
        "a request pipelined behind a refused request is dropped; the refusal is answered once",
        arguments: [secondRequest + secondRequest, "GET / HTTP/2.0\r\n\r\n"])  // the latter: a version NIO refuses
    func pipelinedBehindRefusal(behind: String) async throws {
        try await withRelay { relay, endpoint in
            let raw = try await RawConnection.connect(port: endpoint.port)
            try await raw.write(Self.upgradeWithoutConnectionHeader(path: "/nope") + behind)
            #expect(await raw.waitForClose())
            let text = String(decoding: raw.received, as: UTF8.self)
            #expect(RawConnection.status(of: text) == 404)
            #expect(text.components(separatedBy: "HTTP/1.1 ").count == 2, "one response: \(text)")
            #expect(await eventually { relay.statistics.openConnections == 0 })
        }
    }

    @Test("the 101 carries RFC 6455's Sec-WebSocket-Accept for the client's key")
    func acceptValue() async throws {
        try await withRelay { _, endpoint in
            let raw = try await RawConnection.connect(port: endpoint.port)
            try await raw.write(RawConnection.upgradeRequest(path: TunnelServicePath.new(tunnelID: randomTunnelID()).path))
            let head = await raw.readResponseHead()
            #expect(RawConnection.status(of: head) == 101)
            // RFC 6455 §1.3's example: key dGhlIHNhbXBsZSBub25jZQ== gives s3pPLMBiTxaQ9kYGzzhZRbK+xOo=.
            #expect(head.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"))
            #expect(head.contains("Sec-WebSocket-Protocol: fido.cable\r\n"))
            await raw.close()
        }
    }

    @Test("a joiner that sends its request and a frame and then half-closes still has the frame relayed")
    func frameThenEndOfStream() async throws {
        try await withRelay { _, endpoint in
            let (phone, _, path) = try await openCreator(endpoint)
            let bytes = Array(RawConnection.upgradeRequest(path: path).utf8) + RawConnection.frame(opcode: 0x2, payload: [4, 5, 6])
            // A plain blocking socket: request, frame and FIN leave together.
            let socket = try StalledSocket(port: endpoint.port)
            defer { socket.close() }
            #expect(socket.send(bytes))
            #expect(socket.shutdownWrite())
            #expect(try await phone.receive(timeout: .seconds(2)) == [4, 5, 6])
            await phone.close()
        }
    }

    @Test("a frame sent in the same write as the connect request reaches the tunnel's creator", arguments: [true, false])
    func eagerFrame(withConnectionHeader: Bool) async throws {
        try await withRelay { relay, endpoint in
            let (phone, _, path) = try await openCreator(endpoint)
            let request = withConnectionHeader
                ? RawConnection.upgradeRequest(path: path) : Self.upgradeWithoutConnectionHeader(path: path)
            let raw = try await RawConnection.connect(port: endpoint.port)
            try await raw.write(Array(request.utf8) + RawConnection.frame(opcode: 0x2, payload: [9, 8, 7]))
            #expect(RawConnection.status(of: await raw.readResponseHead()) == 101)
            if withConnectionHeader {
                #expect(try await phone.receive(timeout: .seconds(2)) == [9, 8, 7])
            } else {
                // Without the header NIO's parser reads the frame as the start of a second request:
                // those bytes are dropped (documented in Docs/RELAY.md), the tunnel itself works.
                try await raw.write(RawConnection.frame(opcode: 0x2, payload: [6]))
                #expect(try await phone.receive(timeout: .seconds(2)) == [6])
            }
            await raw.close()
            await phone.close()
            #expect(await eventually { relay.statistics.openConnections == 0 && relay.openTunnelCount == 0 })
        }
    }

    @Test("a HEAD request gets the refusal's head without its body")
    func headRequest() async throws {
        try await withRelay { _, endpoint in
            let raw = try await RawConnection.connect(port: endpoint.port)
            try await raw.write("HEAD /nope HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(await raw.waitForClose())
            let text = String(decoding: raw.received, as: UTF8.self)
            #expect(RawConnection.status(of: text) == 404)
            #expect(text.hasSuffix("\r\n\r\n"))
        }
    }

    @Test("a request line that stops half-way is rechecked with back-off, not in a spin; finished later it is routed")
    func dribbledRequestLine() async throws {
        // Two loops of its own, so the relay has two shards and routes with the dispatcher thread
        // whatever the machine's core count (one shard accepts on its loop, without a dispatcher).
        var configuration = RelayConfiguration()
        configuration.eventLoops = 2
        try await withRelay(configuration, group: twoLoopGroup) { relay, endpoint in
            let tunnelPath = TunnelServicePath.new(tunnelID: randomTunnelID()).path
            let request = RawConnection.upgradeRequest(path: tunnelPath)
            let split = request.index(request.startIndex, offsetBy: 12)  // "GET /cable/n": not routable yet
            let raw = try await RawConnection.connect(port: endpoint.port)
            try await raw.write(String(request[..<split]))
            #expect(await eventually { relay.dispatcherPeekCount >= 1 })
            let before = relay.dispatcherPeekCount
            // The window is what is tested (how often the thread looks while nothing more arrives).
            try await Task.sleep(for: .milliseconds(1500))
            let peeks = relay.dispatcherPeekCount - before
            // Back-off 2, 4, … 256 ms: about 11 looks in 1.5 s; a fixed 2 ms recheck would be ~750.
            #expect(peeks <= 25, "the dispatcher looked \(peeks) times in 1.5 s")
            try await raw.write(String(request[split...]))
            #expect(RawConnection.status(of: await raw.readResponseHead()) == 101)
            await raw.close()
            #expect(await eventually { relay.statistics.openConnections == 0 && relay.openTunnelCount == 0 })
        }
    }

    @Test("bytes held behind a waiting contact request beyond their bound close the connection at once")
    func heldBytesBound() async throws {
        var configuration = RelayConfiguration()
        configuration.contactWait = .seconds(6)  // the request waits for a phone that never listens
        configuration.maxMessageSize = 1024  // held bytes: at most 16 KiB + 1 KiB
        try await withRelay(configuration) { relay, endpoint in
            let path = TunnelServicePath.contact(contactID: Array("some contact".utf8)).path
            let request = RawConnection.upgradeRequest(path: path).replacingOccurrences(
                of: "Content-Length: 0\r\n",
                with: "X-caBLE-Client-Payload: A3014801020304050607080250202122232425262728292A2B2C2D2E2F03626761\r\n")
            let raw = try await RawConnection.connect(port: endpoint.port)
            try await raw.write(request)
            try await raw.write([UInt8](repeating: 0x82, count: 20 * 1024))
            // Closed long before the contact wait would end with its 410.
            #expect(await raw.waitForClose(timeout: .seconds(3)))
            #expect(!String(decoding: raw.received, as: UTF8.self).contains("HTTP/1.1"), "no answer, just the close")
            #expect(await eventually { relay.statistics.openConnections == 0 })
        }
    }
}
