import Foundation
import HybridSim
import HybridTestSupport
import Synchronization
import Testing

/// `desktop --web` answers only requests addressed to its loopback address and port, so a page of
/// another site rebound to 127.0.0.1 (DNS rebinding) cannot read the `FIDO:/` URL from its events,
/// even with the page's token (``DesktopWebServerTokenTests``: without it nothing is answered).
@Suite("desktop --web: the Host header", .serialized, .timeLimit(.minutes(1)))
struct DesktopWebServerHostTests {
    /// A finished ceremony's events: a replay carries the QR secret, then the stream ends.
    static let qrLine = #"{"event":"qr","url":"FIDO:/123456789012345678901234567890"}"#
    static let resultLine = #"{"event":"result","credential":{"type":"public-key"}}"#

    /// Serves a finished event stream on a free port for `body`, with the port and the page's path
    /// (`/s/TOKEN/`).
    static func withServer(_ body: (Int, String) throws -> Void) async throws {
        let events = DesktopWebEvents()
        events.append(qrLine)
        events.append(resultLine)
        let server = try await DesktopWebServer.start(events: events, port: 0)
        do {
            try body(server.port, server.token.path)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    /// One request with exactly `headers`, as raw HTTP/1.1; the status code and the whole response
    /// (the server closes after every response).
    static func get(_ path: String, port: Int, headers: [String]) throws -> (status: Int, response: String) {
        let request = (["GET \(path) HTTP/1.1"] + headers + ["", ""]).joined(separator: "\r\n")
        let exchange = try #require(LoopbackSocket.exchange(port: port, request, ioTimeout: 10), "cannot connect to 127.0.0.1:\(port)")
        return (exchange.status, exchange.response)
    }

    /// The body after the header block.
    static func body(_ response: String) -> String {
        response.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
    }

    @Test("a request for another host gets 421, one with no Host or two gets 400 (RFC 9112 §3.2), each with one plain line and nothing of the ceremony")
    func foreignHostRefused() async throws {
        try await Self.withServer { port, page in
            let refusals: [(String, [String])] = [
                ("rebound name", ["Host: attacker.example"]),
                ("rebound name with the right port", ["Host: attacker.example:\(port)"]),
                ("loopback address, wrong port", ["Host: 127.0.0.1:\(port + 1)"]),
                ("loopback address without the port", ["Host: 127.0.0.1"]),
            ]
            let misdirected = "misdirected request: Host must be 127.0.0.1:\(port), localhost:\(port) or [::1]:\(port)\n"
            let malformed: [(String, [String], String)] = [
                ("no Host", [], "an HTTP/1.1 request needs a Host header\n"),
                ("two Host headers", ["Host: 127.0.0.1:\(port)", "Host: attacker.example"], "more than one Host header (RFC 9112 §3.2)\n"),
            ]
            for (name, headers, expected) in refusals.map({ ($0.0, $0.1, misdirected) }) + malformed {
                for path in [page + "events", page, page + "qr.svg"] {
                    let (status, response) = try Self.get(path, port: port, headers: headers)
                    #expect(status == (expected == misdirected ? 421 : 400), "\(name) \(path): \(response)")
                    #expect(response.contains("Content-Type: text/plain"), "\(name) \(path): \(response)")
                    #expect(Self.body(response) == expected, "\(name) \(path): \(response)")
                    #expect(!response.contains("FIDO:/"), "\(name) \(path): \(response)")
                }
            }
        }
    }

    @Test("a request addressed to the loopback address and port gets the page and the stream")
    func loopbackHostServed() async throws {
        try await Self.withServer { port, path in
            for host in ["127.0.0.1:\(port)", "localhost:\(port)", "LocalHost:\(port)", "[::1]:\(port)"] {
                let page = try Self.get(path, port: port, headers: ["Host: \(host)"])
                #expect(page.status == 200, "\(host): \(page.response)")
                #expect(page.response.contains("new EventSource(\"events\")"), "\(host)")
            }
            let stream = try Self.get(path + "events", port: port, headers: ["Host: 127.0.0.1:\(port)"])
            #expect(stream.status == 200)
            #expect(stream.response.contains("data: \(Self.qrLine)\n\n"), "\(stream.response)")
            let qr = try Self.get(path + "qr.svg", port: port, headers: ["Host: localhost:\(port)"])
            #expect(qr.status == 200 && qr.response.contains("<svg"))
        }
    }

    @Test("another site's page is refused (403) whether it names its Origin or the browser marks it cross-site; the page's own origin is served")
    func crossSiteRefused() async throws {
        try await Self.withServer { port, page in
            let host = "Host: 127.0.0.1:\(port)"
            for (name, extra) in [
                ("foreign Origin", "Origin: https://attacker.example"),
                ("foreign Origin on the loopback address, another port", "Origin: http://127.0.0.1:\(port + 1)"),
                ("Sec-Fetch-Site: cross-site", "Sec-Fetch-Site: cross-site"),
                ("Sec-Fetch-Site: same-site (another port of this machine)", "Sec-Fetch-Site: same-site"),
            ] {
                for path in [page + "events", page, page + "qr.svg"] {
                    let (status, response) = try Self.get(path, port: port, headers: [host, extra])
                    #expect(status == 403, "\(name) \(path): \(response)")
                    #expect(!response.contains("FIDO:/") && !response.contains("<svg"), "\(name) \(path): \(response)")
                }
            }
            for extra in ["Origin: http://localhost:\(port)", "Sec-Fetch-Site: same-origin"] {
                let stream = try Self.get(page + "events", port: port, headers: [host, extra])
                #expect(stream.status == 200 && stream.response.contains("FIDO:/"), "\(extra): \(stream.response)")
            }
        }
    }

    @Test("a HEAD refused for its Host (421, 400) or for another site (403) gets the refusal's head without its body (RFC 9110 §9.3.2)")
    func headRefusalHasNoBody() async throws {
        try await Self.withServer { port, page in
            for (name, headers, status) in [
                ("rebound name", ["Host: attacker.example:\(port)"], 421),
                ("no Host", [], 400),
                ("foreign Origin", ["Host: 127.0.0.1:\(port)", "Origin: https://attacker.example"], 403),
            ] {
                let request = (["HEAD \(page)events HTTP/1.1"] + headers + ["", ""]).joined(separator: "\r\n")
                let exchange = try #require(LoopbackSocket.exchange(port: port, request, ioTimeout: 10), "cannot connect to 127.0.0.1:\(port)")
                #expect(exchange.status == status, "\(name): \(exchange.response)")
                #expect(exchange.response.contains("Content-Length: "), "\(name): the head still says the GET's length: \(exchange.response)")
                #expect(exchange.response.hasSuffix("\r\n\r\n"), "\(name): a body after a HEAD's head: \(exchange.response)")
            }
        }
    }

    @Test("the page may not be framed by another site; an absolute-form target is served by its authority; HTTP/1.0 gets a stream without chunked coding")
    func framingAbsoluteFormAndHTTP10() async throws {
        try await Self.withServer { port, path in
            let page = try Self.get(path, port: port, headers: ["Host: 127.0.0.1:\(port)"])
            #expect(page.response.contains("X-Frame-Options: DENY"), "\(page.response)")
            #expect(page.response.contains("Content-Security-Policy: \(DesktopWebServer.contentSecurityPolicy)\r\n"), "\(page.response)")
            #expect(DesktopWebServer.contentSecurityPolicy.hasSuffix("; frame-ancestors 'none'"))
            #expect(page.response.contains("X-Content-Type-Options: nosniff"), "\(page.response)")
            #expect(page.response.contains("Referrer-Policy: no-referrer\r\n"), "\(page.response)")
            let absolute = try Self.get("http://127.0.0.1:\(port)\(path)qr.svg", port: port, headers: ["Host: 127.0.0.1:\(port)"])
            #expect(absolute.status == 200 && absolute.response.contains("<svg"), "\(absolute.response)")
            let elsewhere = try Self.get("http://attacker.example\(path)qr.svg", port: port, headers: ["Host: 127.0.0.1:\(port)"])
            #expect(elsewhere.status == 421, "\(elsewhere.response)")
            let exchange = try #require(LoopbackSocket.exchange(port: port, "GET \(path)events HTTP/1.0\r\n\r\n", ioTimeout: 10))
            #expect(exchange.response.hasPrefix("HTTP/1.0 200"), "\(exchange.response)")
            #expect(!exchange.response.lowercased().contains("transfer-encoding"), "\(exchange.response)")
            #expect(exchange.response.contains("data: \(Self.resultLine)\n\n") && exchange.closed, "\(exchange.response)")
        }
    }

    @Test("another method is 405 from its head, without waiting for a body it announced; refusals of another site's requests are reported, 404s are not")
    func methodFromHeadAndRefusalsReported() async throws {
        let refused = Mutex<[String]>([])
        let events = DesktopWebEvents(onRefused: { line in refused.withLock { $0.append(line) } })
        events.append(Self.qrLine)
        let server = try await DesktopWebServer.start(events: events, port: 0)
        let (port, page) = (server.port, server.token.path)
        defer { Task { await server.stop() } }
        let start = ContinuousClock.now
        let post = try #require(
            LoopbackSocket.exchange(
                port: port,
                "POST \(page)events HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Length: 2000000\r\nExpect: 100-continue\r\n\r\n",
                ioTimeout: 10))
        #expect(post.status == 405 && post.response.contains("Allow: GET, HEAD\r\n"), "\(post.response)")
        #expect(ContinuousClock.now - start < .seconds(5), "the answer waited for the body")
        _ = try Self.get(page + "nowhere", port: port, headers: ["Host: 127.0.0.1:\(port)"])
        _ = try Self.get(page + "events", port: port, headers: ["Host: attacker.example:\(port)"])
        _ = try Self.get(page, port: port, headers: ["Host: 127.0.0.1:\(port)", "Origin: https://attacker.example"])
        // Another site's form post is refused (and reported) as such, before its method is looked at.
        let form = try #require(
            LoopbackSocket.exchange(
                port: port,
                "POST \(page)events HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nOrigin: https://attacker.example\r\nContent-Length: 3\r\n\r\na=1",
                ioTimeout: 10))
        #expect(form.status == 403, "\(form.response)")
        let lines = refused.withLock { $0 }
        #expect(lines.count == 3, "\(lines)")
        #expect(lines.first?.hasPrefix("GET \(page)events: 421 misdirected request") == true, "\(lines)")
        #expect(lines.dropFirst().first?.hasPrefix("GET \(page): 403 cross-origin request refused: Origin https://attacker.example") == true, "\(lines)")
        #expect(lines.last?.hasPrefix("POST \(page)events: 403 cross-origin request refused") == true, "\(lines)")
    }

    @Test("a request whose head arrived but whose body never finishes gets 408 at the deadline, with the page's headers, and is reported")
    func unfinishedRequestTimesOut() async throws {
        let refused = Mutex<[String]>([])
        let events = DesktopWebEvents(onRefused: { line in refused.withLock { $0.append(line) } })
        let server = try await DesktopWebServer.start(events: events, port: 0, requestDeadline: .milliseconds(300))
        let (port, page) = (server.port, server.token.path)
        defer { Task { await server.stop() } }
        let exchange = try #require(
            LoopbackSocket.exchange(port: port, "GET \(page) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Length: 10\r\n\r\nab", ioTimeout: 5))
        #expect(exchange.status == 408 && exchange.closed, "\(exchange.response)")
        #expect(exchange.response.contains("X-Frame-Options: DENY"), "\(exchange.response)")
        #expect(exchange.response.hasSuffix("the request was not complete within 0.3 s\n"), "\(exchange.response)")
        try await Self.waitForReports(refused, count: 1)
        #expect(refused.withLock { $0 } == ["GET \(page): 408 the request was not complete within 0.3 s"], "\(refused.withLock { $0 })")
    }

    /// Waits (at most 5 s) until `count` refusals are reported: the report comes after the answer
    /// is written, so a check right after the answer could run before it (it did, under load).
    static func waitForReports(_ reports: borrowing Mutex<[String]>, count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(5)
        while reports.withLock({ $0.count }) < count, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
    }

    @Test("a partial head gets 408 at the deadline and an over-long header 431, with the page's headers, each reported")
    func partialAndOverlongHeads() async throws {
        let refused = Mutex<[String]>([])
        let events = DesktopWebEvents(onRefused: { line in refused.withLock { $0.append(line) } })
        let server = try await DesktopWebServer.start(events: events, port: 0, requestDeadline: .milliseconds(300))
        let port = server.port
        defer { Task { await server.stop() } }
        let partial = try #require(LoopbackSocket.exchange(port: port, "GET / HTTP/1.1\r\nHost: 127", ioTimeout: 5))
        #expect(partial.status == 408 && partial.closed, "\(partial.response)")
        #expect(partial.response.contains("X-Frame-Options: DENY"), "\(partial.response)")
        let long = String(repeating: "a", count: 90 * 1024)
        let header = try #require(LoopbackSocket.exchange(port: port, "GET / HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nX-Big: \(long)\r\n\r\n", ioTimeout: 5))
        #expect(header.status == 431 && header.closed, "\(header.response.prefix(200))")
        try await Self.waitForReports(refused, count: 2)
        #expect(refused.withLock { $0 } == [
            "an incomplete request head: 408 the request was not complete within 0.3 s",
            "a request the HTTP parser cannot read: 431 the request head is over 80 KiB",
        ], "\(refused.withLock { $0 })")
    }

    @Test("the Host check: loopback names in any case, with the served port; without a port only on port 80")
    func acceptsHost() {
        #expect(LoopbackRequestPolicy.acceptsHost("127.0.0.1:47003", port: 47003))
        #expect(LoopbackRequestPolicy.acceptsHost("LOCALHOST:47003", port: 47003))
        #expect(LoopbackRequestPolicy.acceptsHost("[::1]:47003", port: 47003))
        #expect(!LoopbackRequestPolicy.acceptsHost("localhost", port: 47003))
        #expect(!LoopbackRequestPolicy.acceptsHost("localhost.:47003", port: 47003))
        #expect(!LoopbackRequestPolicy.acceptsHost("127.0.0.1:47003.attacker.example", port: 47003))
        #expect(!LoopbackRequestPolicy.acceptsHost("", port: 47003))
        #expect(LoopbackRequestPolicy.acceptsHost("localhost", port: 80))
        #expect(LoopbackRequestPolicy.acceptsHost("[::1]", port: 80))
        #expect(LoopbackRequestPolicy.acceptsHost("127.0.0.1:80", port: 80))
        #expect(!LoopbackRequestPolicy.acceptsHost("attacker.example", port: 80))
    }
}
