import Foundation
import HybridCore
@testable import HybridRuntime
import Testing

/// What a hostile relay can put in front of the client after a good 101: frames no server may send
/// (each a specific `.protocolViolation`, not a confusing failure later), and text of its own choice
/// (close reasons, header values, refusal bodies) that must not reach a message line with its
/// control characters: a line break would forge a second `error:` line, an escape sequence would
/// repaint the user's terminal.
@Suite("WebSocket client against a hostile relay", .timeLimit(.minutes(1)))
struct HostileRelayTests {
    private static let connectPath = "/cable/connect/000000/" + String(repeating: "AB", count: 16)
    private static let newPath = "/cable/new/" + String(repeating: "CD", count: 16)

    /// A server frame: FIN (unless `fin` is false), `rsv1`, the opcode, a 7-bit length, the mask
    /// key if given, then the payload (masked with it).
    private static func frame(
        _ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, rsv1: Bool = false, mask: [UInt8]? = nil
    ) -> [UInt8] {
        precondition(payload.count < 126)
        var bytes: [UInt8] = [(fin ? 0x80 : 0) | (rsv1 ? 0x40 : 0) | opcode, UInt8(payload.count) | (mask == nil ? 0 : 0x80)]
        if let mask {
            bytes += mask
            bytes += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        } else {
            bytes += payload
        }
        return bytes
    }

    private func open(_ server: ScriptedHTTPServer, path: String = connectPath) async throws -> WebSocketTunnel {
        var options = WebSocketTunnel.Options()
        options.closeTimeout = .milliseconds(100)  // the scripted server never answers a close frame
        return try await WebSocketTunnel.open(url: "ws://127.0.0.1:\(server.port)" + path, timeout: .seconds(3), options: options)
    }

    /// No scalar below U+0020 or in DEL…U+009F: the text stays on one line and draws nothing.
    private static func isPrintable(_ text: String) -> Bool {
        !text.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }
    }

    @Test(
        "a frame no server may send is a .protocolViolation that says what was wrong",
        arguments: [
            (frame(0x2, [1, 2, 3], mask: [9, 8, 7, 6]), "the relay sent a masked frame; a server never masks its frames (RFC 6455 §5.1)"),
            (frame(0x2, [1, 2, 3], rsv1: true), "the relay set a reserved bit of a frame, but no extension was negotiated (RFC 6455 §5.2)"),
            (frame(0x5, [1]), "the relay sent a frame with opcode 5, which RFC 6455 does not define"),
            (frame(0x0, [1]), "WebSocket protocol error from the relay: a continuation frame with no message to continue"),
            // Fragments are checked one by one, before SwiftNIO's aggregator joins them.
            (
                frame(0x2, [1, 2], fin: false, mask: [9, 8, 7, 6]) + frame(0x0, [3], mask: [1, 2, 3, 4]),
                "the relay sent a masked frame; a server never masks its frames (RFC 6455 §5.1)"
            ),
            (
                frame(0x2, [1, 2], fin: false) + frame(0x0, [3], rsv1: true),
                "the relay set a reserved bit of a frame, but no extension was negotiated (RFC 6455 §5.2)"
            ),
        ])
    func framesNoServerSends(bytes: [UInt8], reason: String) async throws {
        let server = try await ScriptedHTTPServer.start { request in Array(ScriptedHTTPServer.switching(request).utf8) + bytes }
        let tunnel = try await open(server)
        let error = await expectRuntimeError(.protocolViolation) { _ = try await tunnel.receive(timeout: .seconds(2)) }
        #expect(error?.reason == reason)
        #expect(error?.closeCode == .protocolError)
        await tunnel.close()
        await server.stop()
    }

    @Test("a close reason with a line break and an escape sequence reaches the error escaped, on one line")
    func closeReasonEscaped() async throws {
        let reason = Array("\nerror: forged\u{1B}[2J".utf8)
        let close = Self.frame(0x8, [0x0F, 0xA0] + reason)  // 4000, then the reason
        let server = try await ScriptedHTTPServer.start { request in Array(ScriptedHTTPServer.switching(request).utf8) + close }
        let tunnel = try await open(server)
        let error = await expectRuntimeError(.closed) { _ = try await tunnel.receive(timeout: .seconds(2)) }
        #expect(error?.closeCode == WebSocketCloseCode(rawValue: 4000))
        #expect(error?.description == #"tunnel closed with 4000 (private): \u{A}error: forged\u{1B}[2J"#)
        await tunnel.close()
        await server.stop()
    }

    /// A hostile-peers review: these read as a valid close ("1005 (no status)", "999 (unknown): bad",
    /// U+FFFD in the reason) though the client had already answered them 1002 or 1007.
    @Test(
        "a malformed close frame is a .protocolViolation that says what was wrong with it, not a close the relay never validly sent",
        arguments: [
            ([0x03], "close frame body of 1 byte (a code needs 2)", WebSocketCloseCode.protocolError),
            ([0x03, 0xED], "invalid close code 1005", .protocolError),
            ([0x03, 0xE7, 0x62, 0x61, 0x64], "invalid close code 999", .protocolError),
            ([0x0F, 0xA0, 0x62, 0xFF, 0x61], "close reason is not UTF-8", .invalidFramePayloadData),
        ] as [([UInt8], String, WebSocketCloseCode)])
    func malformedClose(body: [UInt8], reason: String, code: WebSocketCloseCode) async throws {
        let server = try await ScriptedHTTPServer.start { request in Array(ScriptedHTTPServer.switching(request).utf8) + Self.frame(0x8, body) }
        let tunnel = try await open(server)
        let error = await expectRuntimeError(.protocolViolation) { _ = try await tunnel.receive(timeout: .seconds(2)) }
        #expect(error?.reason == "the relay sent a malformed close frame: " + reason)
        #expect(error?.closeCode == code)
        await tunnel.close()
        await server.stop()
    }

    @Test("a routing ID header with an escape sequence is refused with the value escaped")
    func routingHeaderEscaped() async throws {
        let server = try await ScriptedHTTPServer.start { request in
            Array(ScriptedHTTPServer.switching(request, headers: ["X-caBLE-Routing-ID: \u{1B}[31mzz"]).utf8)
        }
        let error = await expectRuntimeError(.handshakeFailed) { _ = try await open(server, path: Self.newPath) }
        #expect(error?.reason == #"relay sent a malformed X-caBLE-Routing-ID: \u{1B}[31mzz"#)
        await server.stop()
    }

    @Test("a routing ID header sent twice is refused, even with the same value twice (as Chromium does), and the message counts them")
    func routingHeaderDoubled() async throws {
        let server = try await ScriptedHTTPServer.start { request in
            Array(ScriptedHTTPServer.switching(request, headers: ["X-caBLE-Routing-ID: 0A0B0C", "X-caBLE-Routing-ID: 0A0B0C"]).utf8)
        }
        let error = await expectRuntimeError(.handshakeFailed) { _ = try await open(server, path: Self.newPath) }
        #expect(error?.reason == "relay sent 2 X-caBLE-Routing-ID headers (0A0B0C, 0A0B0C); exactly one is allowed, as Chromium requires")
        await server.stop()
    }

    @Test("a refusal's first body line with an escape sequence is quoted escaped")
    func refusalBodyEscaped() async throws {
        let body = "full\u{1B}[2Jnow"
        let response = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body
        let server = try await ScriptedHTTPServer.start { _ in Array(response.utf8) }
        let start = ContinuousClock.now
        let error = await expectRuntimeError(.upgradeRejected) { _ = try await open(server) }
        #expect(ContinuousClock.now - start < .seconds(2), "complete at the body's length, not at the open's timeout")
        #expect(error?.reason == #"relay rejected /cable/connect: 503 Service Unavailable (full\u{1B}[2Jnow)"#)
        #expect(error.map { Self.isPrintable($0.reason) } == true)
        await server.stop()
    }

    @Test(
        "a status with no body is explained for the endpoint it answered",
        arguments: [
            (newPath, 404, "the server has no caBLE tunnel service at /cable/new"),
            (connectPath, 404, "unknown tunnel or routing ID"),
            (newPath, 409, "tunnel ID already open"),
            (connectPath, 409, "tunnel already joined"),
        ])
    func statusExplainedPerEndpoint(path: String, status: Int, explanation: String) async throws {
        let phrase = status == 404 ? "Not Found" : "Conflict"
        let server = try await ScriptedHTTPServer.start { _ in
            Array("HTTP/1.1 \(status) \(phrase)\r\nContent-Length: 0\r\n\r\n".utf8)
        }
        let error = await expectRuntimeError(.upgradeRejected) { _ = try await open(server, path: path) }
        #expect(error?.httpStatus == status)
        #expect(error?.reason.hasSuffix("\(status) \(phrase) (\(explanation))") == true, "\(String(describing: error))")
        await server.stop()
    }

    @Test(
        "a 2xx or 3xx answer to the upgrade says what the URL probably is, with or without a body",
        arguments: [
            ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
             "relay rejected /cable/new: 200 OK (hello); a tunnel service answers 101 (switching to WebSocket): is the relay URL a caBLE tunnel service?"),
            ("HTTP/1.1 302 Found\r\nLocation: https://elsewhere.example/\r\nContent-Length: 0\r\n\r\n",
             "relay rejected /cable/new: 302 Found; redirects are not followed: give the relay's own URL"),
        ])
    func successOrRedirect(response: String, reason: String) async throws {
        let server = try await ScriptedHTTPServer.start { _ in Array(response.utf8) }
        let error = await expectRuntimeError(.upgradeRejected) { _ = try await open(server, path: Self.newPath) }
        #expect(error?.reason == reason)
        await server.stop()
    }

    @Test("PeerText escapes controls, separators and bidi overrides, keeps other text, cuts long text")
    func peerText() {
        #expect(PeerText.printable("ok é 日本 🙂") == "ok é 日本 🙂")
        #expect(PeerText.printable("a\r\nb\tc\u{7F}\u{85}") == #"a\u{D}\u{A}b\u{9}c\u{7F}\u{85}"#)
        #expect(PeerText.printable("x\u{2028}y\u{202E}z\u{2066}") == #"x\u{2028}y\u{202E}z\u{2066}"#)
        #expect(PeerText.printable(String(repeating: "a", count: 5), limit: 3) == "aaa…")
        #expect(PeerText.printable(String(repeating: "a", count: 3), limit: 3) == "aaa")
        // Idempotent: a close reason escaped in RuntimeError.closed and printed by a narrator, which
        // escapes its whole line, is escaped once.
        let once = PeerText.printable("bye\n\u{1B}[2J \\ done")
        #expect(once == #"bye\u{A}\u{1B}[2J \ done"#)
        #expect(PeerText.printable(once) == once)
        #expect(PeerText.printable(RuntimeError.closed(.goingAway, "bye\nx").description) == RuntimeError.closed(.goingAway, "bye\nx").description)
    }
}
