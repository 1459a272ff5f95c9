import CTAP2
import HybridCore
@testable import HybridRuntime
import Testing

/// The rules of RFC 6455 §4.1 the relay checks beyond NIO's upgrader (§4.2.1 says `400`), and the
/// reasons it gives for a request its HTTP parser cannot read (Docs/RELAY.md, "Refusals").
@Suite("Relay: WebSocket handshake rules")
struct RelayHandshakeRulesTests {
    /// The whole response to `request` (head and body, up to the relay's close) as text.
    private static func answer(to request: String, port: Int) async throws -> String {
        let raw = try await RawConnection.connect(port: port)
        try await raw.write(request)
        #expect(await raw.waitForClose(), "the relay closes after a refusal")
        return String(decoding: raw.received, as: UTF8.self)
    }

    private static func newPath() -> String { TunnelServicePath.new(tunnelID: randomTunnelID()).path }

    @Test(
        "an upgrade that breaks RFC 6455 §4.1 is 400 naming the rule",
        arguments: [
            (key: "abc", edit: nil, reason: "Sec-WebSocket-Key must be base64 of 16 random bytes (RFC 6455 §4.1); it is not base64"),
            (key: "AAAA", edit: nil, reason: "Sec-WebSocket-Key must be base64 of 16 random bytes (RFC 6455 §4.1); it decodes to 3"),
            (
                key: WebSocketUpgradeRequest.sampleKey, edit: "HTTP/1.1\r\n→HTTP/1.0\r\n",
                reason: "a WebSocket upgrade needs HTTP/1.1 (RFC 6455 §4.1); this request is HTTP/1.0"
            ),
            (
                key: WebSocketUpgradeRequest.sampleKey, edit: "Host: 127.0.0.1\r\n→",
                reason: "a WebSocket upgrade needs exactly one Host header (RFC 6455 §4.1); this request has 0"
            ),
            (
                key: WebSocketUpgradeRequest.sampleKey, edit: "Host: 127.0.0.1\r\n→Host: a\r\nHost: b\r\n",
                reason: "a WebSocket upgrade needs exactly one Host header (RFC 6455 §4.1); this request has 2"
            ),
        ] as [(key: String, edit: String?, reason: String)]
    )
    func invalidUpgrade(key: String, edit: String?, reason: String) async throws {
        try await withRelay { relay, endpoint in
            var request = WebSocketUpgradeRequest.text(path: Self.newPath(), key: key)
            if let edit {
                let parts = edit.components(separatedBy: "→")
                request = request.replacingOccurrences(of: parts[0], with: parts[1])
            }
            let answer = try await Self.answer(to: request, port: endpoint.port)
            #expect(answer.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(answer)")
            #expect(answer.hasSuffix("\r\n\r\n\(reason)\n"), "\(answer)")
            #expect(relay.openTunnelCount == 0)
            #expect(relay.statistics.rejectedRequests[400] == 1, "\(relay.statistics.rejectedRequests)")
        }
    }

    @Test("the path and method are judged before the handshake rules: 404 and 400 as before")
    func orderOfChecks() async throws {
        try await withRelay { _, endpoint in
            let unknown = try await Self.answer(
                to: WebSocketUpgradeRequest.text(path: "/index.html", key: "abc"), port: endpoint.port)
            #expect(unknown.hasPrefix("HTTP/1.1 404 "), "\(unknown)")
            let post = try await Self.answer(
                to: WebSocketUpgradeRequest.text(path: Self.newPath(), method: "POST", key: "abc"), port: endpoint.port)
            #expect(post.hasSuffix("\r\n\r\nonly GET is supported\n"), "\(post)")
        }
    }

    @Test("another method is refused from its head: a body it announces is not waited for, nor a 100 Continue")
    func methodDecidedFromHead() async throws {
        try await withRelay { relay, endpoint in
            let start = ContinuousClock.now
            let request = WebSocketUpgradeRequest.text(
                path: Self.newPath(), method: "POST", key: "abc", extra: ["Content-Length: 100000", "Expect: 100-continue"])
            let answer = try await Self.answer(to: request, port: endpoint.port)
            #expect(answer.hasPrefix("HTTP/1.1 400 Bad Request\r\n") && answer.hasSuffix("\r\n\r\nonly GET is supported\n"), "\(answer)")
            #expect(!answer.contains("100 Continue"), "\(answer)")
            #expect(ContinuousClock.now - start < .seconds(5), "the relay waited for the body (its upgrade timeout is 10 s)")
            #expect(relay.statistics.rejectedRequests[400] == 1, "\(relay.statistics.rejectedRequests)")
        }
    }

    @Test("HTTP/2's preface and a method the parser does not know are named, not a parser error code")
    func parserRefusalsNamed() async throws {
        try await withRelay { relay, endpoint in
            let preface = try await Self.answer(to: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", port: endpoint.port)
            #expect(preface.hasPrefix("HTTP/1.1 400 ") && preface.contains("HTTP/2 is not spoken here"), "\(preface)")
            let unknown = try await Self.answer(
                to: WebSocketUpgradeRequest.text(path: Self.newPath(), method: "FOOBAR"), port: endpoint.port)
            #expect(unknown.hasPrefix("HTTP/1.1 400 ") && unknown.contains("an HTTP method the relay does not know"), "\(unknown)")
            #expect(relay.statistics.rejectedRequests == [400: 2], "\(relay.statistics.rejectedRequests)")
        }
    }

    @Test(
        "the parser's vague refusals (llhttp's unknown, a version it cannot read) name the fault the head shows",
        arguments: [
            ("Upgrade: websocket\r\n→Upgrade: websocket\n", "a line of the head ends with a bare LF: HTTP/1.1 lines end with CRLF (RFC 9112 §2.2)"),
            ("Host: 127.0.0.1\r\n→Host: 127.0.0.1\r\nTransfer-Encoding: chunked, chunked\r\n", "Transfer-Encoding names chunked more than once (RFC 9112 §7.1)"),
            ("Host: 127.0.0.1\r\n→Host: 127.0.0.1\r\nTransfer-Encoding: chunked, gzip\r\n", "Transfer-Encoding's last coding is gzip, not chunked: the body's length cannot be known (RFC 9112 §6.3)"),
            (
                "Host: 127.0.0.1\r\n→Host: 127.0.0.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n",
                "Content-Length and Transfer-Encoding together: the body's length would be ambiguous (RFC 9112 §6.3)"
            ),
            ("HTTP/1.1\r\n→HTTP/1.2\r\n", "the request line does not end with HTTP/1.0 or HTTP/1.1"),
        ])
    func framingFaultsNamed(edit: String, reason: String) async throws {
        try await withRelay { relay, endpoint in
            let parts = edit.components(separatedBy: "→")
            let request = WebSocketUpgradeRequest.text(path: Self.newPath()).replacingOccurrences(of: parts[0], with: parts[1])
            #expect(request.contains(parts[1]), "the edit did not apply: \(request)")
            let answer = try await Self.answer(to: request, port: endpoint.port)
            #expect(answer.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(answer)")
            #expect(answer.hasSuffix("\r\n\r\n\(reason)\n"), "\(answer)")
            #expect(relay.statistics.rejectedRequests == [400: 1], "\(relay.statistics.rejectedRequests)")
        }
    }

    @Test("a /cable/contact upgrade that breaks a rule is refused at once with the rule, before any wait for the phone")
    func contactRefusedFirst() async throws {
        try await withRelay { relay, endpoint in
            let path = "/cable/contact/" + Base64URL.encode(Array(repeating: UInt8(7), count: 32))
            let answer = try await Self.answer(to: WebSocketUpgradeRequest.text(path: path, key: "AAAA"), port: endpoint.port)
            #expect(answer.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(answer)")
            #expect(answer.hasSuffix("it decodes to 3\n"), "\(answer)")
        }
    }

    @Test("a valid key of another encoder (RFC 6455's sample, a fresh random one) still upgrades")
    func validKeysUpgrade() async throws {
        try await withRelay { relay, endpoint in
            for key in [WebSocketUpgradeRequest.sampleKey, ClientUpgradeHandler.randomKey()] {
                let raw = try await RawConnection.connect(port: endpoint.port)
                try await raw.write(WebSocketUpgradeRequest.text(path: Self.newPath(), key: key))
                let head = await raw.readResponseHead()
                #expect(RawConnection.status(of: head) == 101, "\(key): \(head)")
                #expect(head.contains("Sec-WebSocket-Accept: \(WebSocketAccept.value(forKey: key))"), "\(head)")
                await raw.close()
            }
            #expect(await eventually { relay.openTunnelCount == 0 })
        }
    }

    @Test("a 70 KiB head that arrives in many small reads is under the bound: 101 (each byte counted once)")
    func largeHeadInPieces() async throws {
        try await withRelay { _, endpoint in
            // One long line: the parser keeps an unfinished line in the buffer, so it is handed
            // the same bytes again with every read that extends it.
            let request = Array(WebSocketUpgradeRequest.text(
                path: Self.newPath(), extra: ["X-Padding: " + String(repeating: "b", count: 70_000)]).utf8)
            #expect(request.count > 70_000 && request.count < FirstRequestDecoder.maximumHeadSize)
            let raw = try await RawConnection.connect(port: endpoint.port)
            for start in stride(from: 0, to: request.count, by: 1_000) {
                try await raw.write(Array(request[start..<min(start + 1_000, request.count)]))
                if start % 10_000 == 0 { try await Task.sleep(for: .milliseconds(2)) }
            }
            #expect(RawConnection.status(of: await raw.readResponseHead()) == 101)
            await raw.close()
        }
    }

    @Test("a request head over 80 KiB is 431 with a reason; an unreadable request is 400 naming the parser's complaint")
    func unreadableRequests() async throws {
        try await withRelay { relay, endpoint in
            let huge = WebSocketUpgradeRequest.text(
                path: Self.newPath(), extra: ["X-Padding: " + String(repeating: "a", count: 100_000)])
            let tooLarge = try await Self.answer(to: huge, port: endpoint.port)
            #expect(tooLarge.hasPrefix("HTTP/1.1 431 Request Header Fields Too Large\r\n"), "\(tooLarge.prefix(200))")
            #expect(tooLarge.contains("\r\n\r\nrequest head over 80 KiB"), "\(tooLarge.prefix(300))")
            let garbage = try await Self.answer(to: "GET /cable/new/00 HTTP/1.1\r\nBad Header\r\n\r\n", port: endpoint.port)
            #expect(garbage.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(garbage)")
            #expect(garbage.contains("\r\n\r\nmalformed HTTP request ("), "\(garbage)")
            // Many short lines over 80 KiB together: the whole head is bounded, not only one line.
            let many = WebSocketUpgradeRequest.text(
                path: Self.newPath(), extra: Array(repeating: "X-A: b", count: 20_000))
            let manyLines = try await Self.answer(to: many, port: endpoint.port)
            #expect(manyLines.hasPrefix("HTTP/1.1 431 Request Header Fields Too Large\r\n"), "\(manyLines.prefix(200))")
            #expect(relay.statistics.rejectedRequests[431] == 2, "\(relay.statistics.rejectedRequests)")
            #expect(relay.openTunnelCount == 0)
        }
    }
}
