import Foundation
import HybridCore
import NIOCore
import NIOEmbedded
@testable import HybridRuntime
import Testing

/// The client's hand-written WebSocket upgrade (`ClientUpgradeHandler`) against a server whose
/// answers are written by hand: the request it sends, every check on the 101 with its specific
/// error, refusals with their bodies however they are framed, and frames right behind the 101.
@Suite("WebSocket client upgrade")
struct ClientUpgradeTests {
    private static let path = "/cable/connect/000000/" + String(repeating: "AB", count: 16)

    private static func switching(_ request: String, headers: [String] = []) -> String {
        ScriptedHTTPServer.switching(request, headers: headers)
    }

    private func open(_ server: ScriptedHTTPServer, timeout: Duration = .seconds(3)) async throws -> WebSocketTunnel {
        var options = WebSocketTunnel.Options()
        options.closeTimeout = .milliseconds(100)  // the scripted server never answers a close frame
        return try await WebSocketTunnel.open(url: "ws://127.0.0.1:\(server.port)" + Self.path, timeout: timeout, options: options)
    }

    @Test(
        "a close code no endpoint may send (1005, 1006, 1015, reserved) is answered 1002, not echoed; a valid one is echoed",
        arguments: [(UInt16(1005), UInt16(1002)), (1006, 1002), (1015, 1002), (1016, 1002), (999, 1002), (1000, 1000), (4000, 4000)])
    func closeCodeAnswer(received: UInt16, answered: UInt16) async throws {
        let close: [UInt8] = [0x88, 0x02, UInt8(received >> 8), UInt8(received & 0xFF)]
        let server = try await ScriptedHTTPServer.start { Array(Self.switching($0).utf8) + close }
        defer { Task { await server.stop() } }
        let tunnel = try await open(server)
        _ = try? await tunnel.receive(timeout: .seconds(2))
        let deadline = ContinuousClock.now + .seconds(3)
        while server.receivedAfterRequests.count < 8, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let frame = server.receivedAfterRequests
        // A masked close frame with a 2-byte body: 0x88, 0x82, the mask, the code XOR the mask.
        try #require(frame.count >= 8 && frame[0] == 0x88 && frame[1] == 0x82, "\(frame)")
        let code = UInt16(frame[6] ^ frame[2]) << 8 | UInt16(frame[7] ^ frame[3])
        #expect(code == answered, "received \(received), answered \(code)")
    }

    @Test("a message in more than 256 fragments from the relay: the error names the fragments, not a size it did not reach")
    func tooManyFragments() async throws {
        let fragments: [UInt8] = [0x02, 0x01, 0x01] + Array([[UInt8]](repeating: [0x00, 0x01, 0x01], count: 300).joined())
        let server = try await ScriptedHTTPServer.start { Array(Self.switching($0).utf8) + fragments }
        defer { Task { await server.stop() } }
        let tunnel = try await open(server)
        let error = await expectRuntimeError(.messageTooLarge) { _ = try await tunnel.receive(timeout: .seconds(3)) }
        #expect(error?.reason.contains("the relay sent a message in more than 256 fragments") == true, "\(String(describing: error))")
    }

    @Test("a 410 is explained as a revoked contact ID only where contact IDs exist (contact, listen), not on the QR flow's endpoints")
    func goneExplained() {
        #expect(TunnelServicePath.explain(status: 410, endpoint: "/cable/contact") == "contact ID unknown or revoked")
        #expect(TunnelServicePath.explain(status: 410, endpoint: "/cable/listen") == "contact ID unknown or revoked")
        #expect(TunnelServicePath.explain(status: 410, endpoint: "/cable/new") == nil)
        #expect(TunnelServicePath.explain(status: 410, endpoint: "/cable/connect") == nil)
    }

    @Test("Sec-WebSocket-Accept is RFC 6455's known answer")
    func acceptKnownAnswer() {
        // RFC 6455 §1.3.
        #expect(WebSocketAccept.value(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    @Test("the request: GET, the caller's headers, then the upgrade headers with a fresh 16-byte key")
    func request() async throws {
        let server = try await ScriptedHTTPServer.start { Array(Self.switching($0).utf8) }
        let first = try await open(server)
        let second = try await open(server)
        let heads = server.receivedRequests
        #expect(heads.count == 2)
        let lines = heads[0].components(separatedBy: "\r\n")
        #expect(Array(lines.prefix(5)) == [
            "GET \(Self.path) HTTP/1.1", "Host: 127.0.0.1:\(server.port)", "Origin: ws://127.0.0.1:\(server.port)",
            "Sec-WebSocket-Protocol: fido.cable", "Content-Length: 0",
        ])
        #expect(Array(lines[5...6]) == ["Connection: upgrade", "Upgrade: websocket"])
        let key = try #require(ScriptedHTTPServer.header("Sec-WebSocket-Key", in: heads[0]))
        #expect(Data(base64Encoded: key)?.count == 16)
        #expect(lines[8...] == ["Sec-WebSocket-Version: 13", "", ""])
        #expect(ScriptedHTTPServer.header("Sec-WebSocket-Key", in: heads[1]) != key, "a fresh key per connection")
        await first.close()
        await second.close()
        await server.stop()
    }

    @Test(
        "a 101 that fails a check is .handshakeFailed naming it",
        arguments: [
            ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: AAAA\r\n\r\n", "wrong Sec-WebSocket-Accept (AAAA)"),
            ("RIGHT_ACCEPT_TWICE", "has 2 Sec-WebSocket-Accept headers"),
            ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", "has no Sec-WebSocket-Accept header"),
            ("RIGHT_ACCEPT_DEFLATE", "selects the extension permessage-deflate, which was not offered"),
            ("HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Accept: AAAA\r\n\r\n", "does not upgrade to websocket (Upgrade: none)"),
            ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", "does not upgrade to websocket (Upgrade: h2c)"),
            // Not HTTP: refused at its first bytes, with no end of head (the server then stays silent).
            ("SSH-2.0-OpenSSH_9.2\r\n", "the relay's answer is not HTTP/1.x: it begins \"SSH-2.0-OpenSSH_…\" (is the relay URL a tunnel service?)"),
            ("\0\0\u{12}\u{4}\0\0\0\0\0", "the relay's answer is not HTTP/1.x: it begins \"\\x00\\x00\\x12\\x04"),
            ("HTTP/1.1 1O1 Switching\r\n\r\n", "is not HTTP/1.x: the status line is not HTTP/1.x with a three-digit status (\"HTTP/1.1 1O1 Switching\")"),
            ("HTTP/1.1 101 Switching Protocols\r\nno colon here\r\n\r\n", "is not HTTP/1.x: a header line without a colon (\"no colon here\")"),
            // Bytes of a head line that are not printable ASCII: \xNN, as at the answer's start.
            ("HTTP/1.1 101 Switching Protocols\r\n\u{1}\u{7F}bad\r\n\r\n", "a header line without a colon (\"\\x01\\x7Fbad\")"),
        ])
    func badSwitch(response: String, reason: String) async throws {
        let server = try await ScriptedHTTPServer.start { request in
            guard response.hasPrefix("RIGHT_ACCEPT") else { return Array(response.utf8) }
            let key = ScriptedHTTPServer.header("Sec-WebSocket-Key", in: request) ?? ""
            let accept = WebSocketAccept.value(forKey: key)
            // switching() adds the right Accept already: once more makes two; or an extension.
            let extra = response == "RIGHT_ACCEPT_TWICE" ? "Sec-WebSocket-Accept: \(accept)" : "Sec-WebSocket-Extensions: permessage-deflate"
            return Array(Self.switching(request, headers: [extra]).utf8)
        }
        let error = await expectRuntimeError(.handshakeFailed) { _ = try await open(server) }
        #expect(error?.reason.contains(reason) == true, "\(String(describing: error))")
        await server.stop()
    }

    @Test("a folded header line (obs-fold) is joined to the one before with a space, as RFC 9112 §5.2 tells a user agent; two Sec-WebSocket-Protocol headers are named as such")
    func foldedAndRepeatedHeaders() async throws {
        let folded = try await ScriptedHTTPServer.start { request in
            let key = ScriptedHTTPServer.header("Sec-WebSocket-Key", in: request) ?? ""
            return Array(
                ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    + "Sec-WebSocket-Accept: \(WebSocketAccept.value(forKey: key))\r\nSec-WebSocket-Protocol:\r\n fido.cable\r\n\r\n").utf8)
        }
        let tunnel = try await open(folded)
        await tunnel.close()
        await folded.stop()
        let repeated = try await ScriptedHTTPServer.start { request in
            Array(Self.switching(request, headers: ["Sec-WebSocket-Protocol: fido.cable"]).utf8)
        }
        let error = await expectRuntimeError(.handshakeFailed) { _ = try await open(repeated) }
        #expect(error?.reason.contains("relay sent 2 Sec-WebSocket-Protocol headers for /cable/connect (fido.cable, fido.cable)") == true, "\(String(describing: error))")
        await repeated.stop()
    }

    @Test("a response head over 16 KiB is .handshakeFailed at once")
    func oversizedHead() async throws {
        let server = try await ScriptedHTTPServer.start { _ in
            Array(("HTTP/1.1 101 Switching Protocols\r\nX-Padding: " + String(repeating: "a", count: 17_000)).utf8)
        }
        let start = ContinuousClock.now
        let error = await expectRuntimeError(.handshakeFailed) { _ = try await open(server, timeout: .seconds(5)) }
        #expect(error?.reason == "the relay's response head is over 16384 bytes")
        #expect(ContinuousClock.now - start < .seconds(2), "not only at the timeout")
        await server.stop()
    }

    @Test("a connection closed before the response head is .handshakeFailed, said in words (not SwiftNIO's 'End of file')",
          arguments: ["HTTP/1.1 101 Swi", ""])
    func closedEarly(partial: String) async throws {
        let server = try await ScriptedHTTPServer.start(closeAfter: true) { _ in Array(partial.utf8) }
        let error = await expectRuntimeError(.handshakeFailed) { _ = try await open(server) }
        #expect(error?.reason.hasSuffix("failed: the server closed the connection without answering") == true, "\(String(describing: error))")
        await server.stop()
    }

    @Test(
        "a refusal is .upgradeRejected with its status and body's first line, however the body is framed",
        arguments: [
            // Content-Length, connection left open: the body's length ends it.
            ("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 25\r\n\r\nrelay is full\nsecond line", false, 503),
            // Chunked, connection left open: the last chunk ends it.
            ("HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nrelay \r\n7\r\nis full\r\n0\r\n\r\n", false, 404),
            // Neither: the end of the connection ends it.
            ("HTTP/1.0 410 Gone\r\n\r\nrelay is full", true, 410),
        ])
    func refusal(response: String, closeAfter: Bool, status: Int) async throws {
        let server = try await ScriptedHTTPServer.start(closeAfter: closeAfter) { _ in Array(response.utf8) }
        let start = ContinuousClock.now
        let error = await expectRuntimeError(.upgradeRejected) { _ = try await open(server, timeout: .seconds(5)) }
        #expect(ContinuousClock.now - start < .seconds(2), "complete when the body is, not at the open's timeout")
        #expect(error?.httpStatus == status)
        #expect(error?.reason.hasSuffix("(relay is full)") == true, "\(String(describing: error))")
        await server.stop()
    }

    @Test(
        "an HTML gateway error is a proxy's (nginx's 502 page): the message says what the proxy meant instead of quoting '<html>'",
        arguments: [
            (502, "a proxy in front of the relay could not reach the relay behind it"),
            (504, "a proxy in front of the relay got no answer from the relay behind it in time"),
        ])
    func proxyRefusal(status: Int, meaning: String) async throws {
        let page = "<html>\r\n<head><title>\(status) Bad Gateway</title></head>\r\n<body>\r\n<center><h1>\(status)</h1></center>\r\n</body>\r\n</html>\r\n"
        let response = "HTTP/1.1 \(status) Bad Gateway\r\nContent-Type: text/html\r\nContent-Length: \(page.utf8.count)\r\n\r\n" + page
        let server = try await ScriptedHTTPServer.start(closeAfter: false) { _ in Array(response.utf8) }
        let error = await expectRuntimeError(.upgradeRejected) { _ = try await open(server, timeout: .seconds(5)) }
        #expect(error?.httpStatus == status)
        #expect(error?.reason.hasSuffix(" (\(meaning))") == true, "\(String(describing: error))")
        #expect(error?.reason.contains("<html>") == false, "\(String(describing: error))")
        await server.stop()
    }

    /// What the client says of an HTML page that is no gateway's error: what answered, and that it
    /// is no tunnel service.
    private static func notATunnelService(_ statusLine: String, title: String) -> String {
        "the server answered /cable/connect with \(statusLine) and an HTML page titled \"\(title)\": not a caBLE tunnel service, "
            + "which answers 101 (switching to WebSocket) or refuses in plain text; is the relay URL right? "
            + "(another web server listens there, or a proxy in front of the relay answered itself)"
    }

    @Test("a web server that is no relay (python3 -m http.server's 404 page, HTTP/1.0, closed after): what answered and that it is no tunnel service, a proxy only as one possibility")
    func webServerPage() async throws {
        let page = "<!DOCTYPE HTML>\n<html lang=\"en\">\n    <head>\n        <meta charset=\"utf-8\">\n"
            + "        <title>Error response</title>\n    </head>\n    <body>\n        <h1>Error response</h1>\n"
            + "        <p>Error code: 404</p>\n        <p>Message: File not found.</p>\n    </body>\n</html>\n"
        let response = "HTTP/1.0 404 File not found\r\nServer: SimpleHTTP/0.6 Python/3.11.2\r\nConnection: close\r\n"
            + "Content-Type: text/html;charset=utf-8\r\nContent-Length: \(page.utf8.count)\r\n\r\n" + page
        let server = try await ScriptedHTTPServer.start(closeAfter: true) { _ in Array(response.utf8) }
        let error = await expectRuntimeError(.upgradeRejected) { _ = try await open(server, timeout: .seconds(5)) }
        #expect(error?.httpStatus == 404)
        #expect(error?.reason == Self.notATunnelService("404 Not Found", title: "Error response"), "\(String(describing: error))")
        await server.stop()
    }

    @Test("nginx's 400 for plain HTTP on its HTTPS port: the page's title is in the message, printable and bounded")
    func proxyPageTitle() async throws {
        let page = "<html>\r\n<head><TITLE>400 The plain HTTP request was sent to HTTPS port</TITLE></head>\r\n"
            + "<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n</body>\r\n</html>\r\n"
        let response = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/html\r\nContent-Length: \(page.utf8.count)\r\n\r\n" + page
        let server = try await ScriptedHTTPServer.start(closeAfter: false) { _ in Array(response.utf8) }
        let error = await expectRuntimeError(.upgradeRejected) { _ = try await open(server, timeout: .seconds(5)) }
        #expect(
            error?.reason == Self.notATunnelService("400 Bad Request", title: "400 The plain HTTP request was sent to HTTPS port"),
            "\(String(describing: error))")
        await server.stop()
        // A title with line breaks and a terminal escape stays one printable line; a long one is cut.
        let hostile = TunnelServicePath.htmlTitle("<title>\n  a\u{1B}[31m\n b  </title>")
        #expect(hostile?.contains("\u{1B}") == false)
        #expect(hostile?.hasPrefix("a") == true && hostile?.hasSuffix(" b") == true, "\(hostile ?? "")")
        #expect((TunnelServicePath.htmlTitle("<title>" + String(repeating: "x", count: 500) + "</title>")?.count ?? 0) <= 121)
        #expect(TunnelServicePath.htmlTitle("<html><body>no title</body></html>") == nil)
        #expect(TunnelServicePath.htmlTitle("<title> </title>") == nil)
    }

    @Test(
        "a hostile refusal (negative lengths, a chunk line that never ends) is a refusal, not a crash or a hang",
        arguments: [
            "HTTP/1.1 503 Service Unavailable\r\nContent-Length: -1\r\n\r\nrelay is full",
            "HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\nrelay is full\r\n",
            "HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n5;" + String(repeating: "x", count: 40_000),
        ])
    func hostileRefusal(response: String) async throws {
        let server = try await ScriptedHTTPServer.start(closeAfter: false) { _ in Array(response.utf8) }
        let start = ContinuousClock.now
        let error = await expectRuntimeError(.upgradeRejected) { _ = try await open(server, timeout: .seconds(5)) }
        #expect(ContinuousClock.now - start < .seconds(2), "complete without waiting for the open's timeout")
        #expect(error?.httpStatus == 503)
        await server.stop()
    }

    @Test("interim responses (100 Continue) before the 101 are skipped, as NIO's decoder did, up to 16; a 17th is a relay that never answers")
    func interimResponse() async throws {
        let server = try await ScriptedHTTPServer.start { request in
            Array((String(repeating: "HTTP/1.1 100 Continue\r\n\r\n", count: 16) + Self.switching(request)).utf8)
        }
        let tunnel = try await open(server)
        await tunnel.close()
        await server.stop()
        let endless = try await ScriptedHTTPServer.start { request in
            Array((String(repeating: "HTTP/1.1 100 Continue\r\n\r\n", count: 17) + Self.switching(request)).utf8)
        }
        let error = await expectRuntimeError(.handshakeFailed) { _ = try await open(endless) }
        #expect(error?.reason == "the relay sent more than 16 interim (1xx) responses before its answer", "\(String(describing: error))")
        await endless.stop()
    }

    @Test("a path or header with CR, LF or NUL is not sent: .handshakeFailed before any byte goes out")
    func headerInjection() throws {
        for (path, headers) in [("/cable/new/AB\r\nX-Injected: 1", [("Host", "h")]), ("/ok", [("Origin", "ws://h\n")])] {
            let channel = EmbeddedChannel()
            let promise = channel.eventLoop.makePromise(of: ClientUpgradeOutcome.self)
            let handler = ClientUpgradeHandler(
                path: path, headers: headers, promise: promise,
                install: { _, _ in throw RuntimeError(.handshakeFailed, "must not be reached") })
            try channel.pipeline.syncOperations.addHandler(handler)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
            #expect(try channel.readOutbound(as: ByteBuffer.self) == nil, "nothing written for \(path)")
            // The embedded loop completes it on this thread, at once.
            let failure: RuntimeError? = {
                do { _ = try promise.futureResult.wait(); return nil } catch { return error as? RuntimeError }
            }()
            #expect(failure?.code == .handshakeFailed)
            #expect(failure?.reason.contains("CR, LF or NUL") == true)
            _ = try? channel.finish()
        }
    }

    @Test("frames sent right behind the 101 (bare LF line ends, lower-case names) reach the tunnel in order")
    func framesBehindTheSwitch() async throws {
        let server = try await ScriptedHTTPServer.start { request in
            let key = ScriptedHTTPServer.header("Sec-WebSocket-Key", in: request) ?? ""
            let head = [
                "HTTP/1.1 101 Switching Protocols", "upgrade: WebSocket", "connection: upgrade",
                "sec-websocket-accept: \(WebSocketAccept.value(forKey: key))", "sec-websocket-protocol: fido.cable",
                "x-cable-routing-id: 0a0b0c",
            ].joined(separator: "\n") + "\n\n"
            return Array(head.utf8) + [0x82, 0x02, 0x01, 0x02] + [0x82, 0x01, 0x03]
        }
        let tunnel = try await open(server)
        #expect(tunnel.routingID == [0x0A, 0x0B, 0x0C])
        #expect(try await tunnel.receive(timeout: .seconds(2)) == [1, 2])
        #expect(try await tunnel.receive(timeout: .seconds(2)) == [3])
        await tunnel.close()
        await server.stop()
    }
}
