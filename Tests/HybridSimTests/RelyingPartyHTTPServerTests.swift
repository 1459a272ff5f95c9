import Foundation
import HybridCore
@testable import HybridSim
import HybridTestSupport
import NIOCore
import Synchronization
import Testing

/// `hybrid-sim rp`'s listener against clients that misbehave at the HTTP level: each connection
/// ends (EOF) instead of staying open, and a body that nests JSON deeply costs no more than its size.
@Suite("Relying-party server: hostile HTTP clients", .timeLimit(.minutes(1)))
struct RelyingPartyHTTPServerTests {
    private func withServer(
        maximumConnections: Int = 16, log: @escaping @Sendable (String) -> Void = { _ in }, _ body: (Int) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let service = RelyingPartyService(
            profile: try RelyingPartyProfile.load("hanko"),
            relyingParty: RelyingParty(id: "example.com", origin: "https://example.com"),
            store: RelyingPartyStore(path: directory.file("store.json")), log: log)
        let server = try await RelyingPartyHTTPServer.start(
            service: service, port: 0, requestDeadline: .milliseconds(300), maximumConnections: maximumConnections)
        do {
            try await body(server.port)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    /// Sends `request` and reads until the server closes (or 5 s pass).
    private func exchange(port: Int, _ request: String) throws -> (answer: String, closed: Bool) {
        let exchange = try #require(LoopbackSocket.exchange(port: port, request), "cannot reach 127.0.0.1:\(port)")
        return (exchange.response, exchange.closed)
    }

    @Test("a foreign Host or target authority is 421 and two Hosts are 400; any page's Origin but this server's, or a fetch not same-origin, is 403; each refusal is logged")
    func hostAndOriginChecked() async throws {
        let lines = Mutex<[String]>([])
        try await withServer(log: { line in lines.withLock { $0.append(line) } }) { port in
            let path = "GET /authentication_initialize HTTP/1.1\r\n"
            let cases = [
                ("Host: attacker.example:\(port)\r\n", "HTTP/1.1 421"),
                ("Host: 127.0.0.1:\(port)\r\nHost: 127.0.0.1:\(port)\r\n", "HTTP/1.1 400"),
                ("Host: 127.0.0.1:\(port)\r\nOrigin: https://attacker.example\r\n", "HTTP/1.1 403"),
                // The relying party's own origin too: its pages are not served from here.
                ("Host: 127.0.0.1:\(port)\r\nOrigin: https://example.com\r\n", "HTTP/1.1 403"),
                ("Host: 127.0.0.1:\(port)\r\nOrigin: http://127.0.0.1:\(port)\r\nOrigin: https://attacker.example\r\n", "HTTP/1.1 400"),
                // Another port of this machine is the same site, not the same origin.
                ("Host: 127.0.0.1:\(port)\r\nSec-Fetch-Site: same-site\r\n", "HTTP/1.1 403"),
                ("Host: 127.0.0.1:\(port)\r\nSec-Fetch-Site: cross-site\r\n", "HTTP/1.1 403"),
                ("Host: localhost:\(port)\r\nOrigin: http://localhost:\(port)\r\nSec-Fetch-Site: same-origin\r\n", "HTTP/1.1 200"),
                ("Host: 127.0.0.1:\(port)\r\nSec-Fetch-Site: none\r\n", "HTTP/1.1 200"),
            ]
            for (headers, status) in cases {
                let (answer, _) = try exchange(port: port, path + headers + "\r\n")
                #expect(answer.hasPrefix(status), "\(headers): \(answer)")
                if status != "HTTP/1.1 200" { #expect(!answer.contains("challenge"), "\(answer)") }
                // A challenge (or a refusal) is never cached.
                #expect(answer.contains("\r\nCache-Control: no-store\r\n") && answer.contains("\r\nX-Content-Type-Options: nosniff\r\n"), "\(answer)")
            }
            let (absolute, _) = try exchange(
                port: port, "GET http://attacker.example/authentication_initialize HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
            #expect(absolute.hasPrefix("HTTP/1.1 421"), "\(absolute)")
        }
        let refused = lines.withLock { $0 }.filter { $0.hasPrefix("refused GET ") }
        #expect(refused.count == 8, "\(lines.withLock { $0 })")
        #expect(refused.first?.contains("421 misdirected request") == true, "\(refused)")
        #expect(refused.contains { $0.contains("403 request from another site's page refused (Sec-Fetch-Site: same-site)") }, "\(refused)")
    }

    @Test("a transfer coding other than chunked is 501 before the body is read (RFC 9112 §6.1)")
    func unknownTransferCoding() async throws {
        try await withServer { port in
            let (answer, closed) = try exchange(
                port: port,
                "POST /authentication_finalize HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
            #expect(answer.hasPrefix("HTTP/1.1 501"), "\(answer)")
            #expect(answer.contains("transfer coding gzip is not implemented"), "\(answer)")
            #expect(closed)
        }
    }

    @Test("a client that half-closes after a complete request still gets the answer; one that half-closes mid-request gets 400")
    func halfClosedClientAnswered() async throws {
        try await withServer { port in
            for (request, status) in [
                ("GET /authentication_initialize HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n", "HTTP/1.1 200"),
                ("POST /authentication_finalize HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Length: 50\r\n\r\n{", "HTTP/1.1 400"),
            ] {
                let fd = try #require(LoopbackSocket.connect(port: port, ioTimeout: 3))
                defer { close(fd) }
                #expect(LoopbackSocket.send(fd, request))
                #expect(shutdown(fd, Int32(SHUT_WR)) == 0)
                let answer = LoopbackSocket.receive(fd, until: "\u{0}")
                #expect(answer.hasPrefix(status), "\(request): \(answer.debugDescription)")
            }
        }
    }

    @Test("a request the parser cannot read gets 400 and the connection ends (it stayed open)")
    func malformedRequestCloses() async throws {
        try await withServer { port in
            let (answer, closed) = try exchange(port: port, "GARBAGE\r\n\r\n")
            #expect(answer.hasPrefix("HTTP/1.1 400"), "\(answer)")
            #expect(answer.contains("\r\nCache-Control: no-store\r\n") && answer.contains("\r\nX-Content-Type-Options: nosniff\r\n"), "\(answer)")
            #expect(closed)
        }
    }

    @Test("a Content-Length over 1 MiB gets 413 at once, before any body byte, and the connection ends")
    func oversizedBodyRefusedEarly() async throws {
        try await withServer { port in
            let (answer, closed) = try exchange(
                port: port, "POST /registration/initialize HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Length: 2000000\r\n\r\n")
            #expect(answer.hasPrefix("HTTP/1.1 413"), "\(answer)")
            #expect(closed)
        }
    }

    @Test("an HTTP/1.1 request without a Host header gets 400 (RFC 9112 §3.2)")
    func missingHostRefused() async throws {
        try await withServer { port in
            let (answer, closed) = try exchange(port: port, "GET /authentication_initialize HTTP/1.1\r\n\r\n")
            #expect(answer.hasPrefix("HTTP/1.1 400"), "\(answer)")
            #expect(answer.contains("needs a Host header"), "\(answer)")
            #expect(closed)
        }
    }

    @Test("past the connection cap a connection gets the relay's fixed 503 and ends; a slot freed serves again")
    func connectionCap() async throws {
        try await withServer(maximumConnections: 1) { port in
            let request = "GET /authentication_initialize HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n"
            // Asks until the answer is not `passing` (the server counts a connection on its loop,
            // after the client's connect or close returned: no fixed pause is long enough everywhere).
            func exchange(until passing: String) async throws -> (answer: String, closed: Bool) {
                let deadline = ContinuousClock.now + .seconds(5)
                while true {
                    let result = try self.exchange(port: port, request)
                    if !result.answer.hasPrefix(passing) || ContinuousClock.now > deadline { return result }
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
            // A holder that sends nothing takes the only slot once the server's loop has counted it.
            // The server's two loops may count a second connection first, which then takes the slot
            // (and the holder gets the 503): then a new holder tries again.
            var holder: Int32 = -1
            var answer = "", closed = false
            for attempt in 1...5 {
                if holder >= 0 { close(holder) }
                holder = try #require(LoopbackSocket.connect(port: port))
                try await Task.sleep(for: .milliseconds(50 * attempt))
                (answer, closed) = try self.exchange(port: port, request)
                if !answer.hasPrefix("HTTP/1.1 200") { break }
            }
            #expect(answer.hasPrefix("HTTP/1.1 503"), "\(answer)")
            #expect(answer.contains("too many connections"), "\(answer)")
            #expect(closed)
            close(holder)
            let (served, _) = try await exchange(until: "HTTP/1.1 503")  // until its close is seen
            #expect(served.hasPrefix("HTTP/1.1 200"), "\(served)")
        }
    }

    @Test("Expect: 100-continue gets its 100 before the body is sent, then the final answer")
    func expectContinue() async throws {
        try await withServer { port in
            let fd = try #require(LoopbackSocket.connect(port: port, ioTimeout: 3))
            defer { close(fd) }
            let body = "{}"
            #expect(LoopbackSocket.send(fd, "POST /authentication_finalize HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Type: application/json\r\n"
                + "Content-Length: \(body.utf8.count)\r\nExpect: x-other, 100-Continue\r\n\r\n"))
            let interim = LoopbackSocket.receive(fd, until: "\r\n\r\n")
            #expect(interim.hasPrefix("HTTP/1.1 100 Continue\r\n"), "no 100 within 3 s: \(interim.debugDescription)")
            #expect(LoopbackSocket.send(fd, body))
            let final = LoopbackSocket.receive(fd, until: "}")
            #expect(final.hasPrefix("HTTP/1.1 400"), "\(final)")
            #expect(final.contains("response is required"), "the body was read and judged: \(final)")
        }
    }

    @Test(
        "Expect: 100-continue never gets a 100 when the head decides the answer (it comes at once) or the request is HTTP/1.0",
        arguments: [
            ("POST /nowhere HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nContent-Length: 2\r\n", "HTTP/1.1 404", "no endpoint POST /nowhere"),
            ("PUT /authentication_finalize HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nContent-Length: 2\r\n", "HTTP/1.1 405", "takes POST"),
            ("POST /authentication_finalize HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nContent-Length: 2000000\r\n", "HTTP/1.1 413", "larger than 1 MiB"),
            ("POST /authentication_finalize HTTP/1.1\r\nContent-Length: 2\r\n", "HTTP/1.1 400", "needs a Host header"),
            // HTTP/1.0 has no 100 (RFC 9110 §10.1.1): the server waits for the body, which never comes.
            ("POST /authentication_finalize HTTP/1.0\r\nContent-Length: 2\r\n", "", ""),
        ])
    func expectContinueDecidedByHead(head: String, status: String, mention: String) async throws {
        try await withServer { port in
            let fd = try #require(LoopbackSocket.connect(port: port, ioTimeout: 3))
            defer { close(fd) }
            #expect(LoopbackSocket.send(fd, head.replacingOccurrences(of: "PORT", with: "\(port)") + "Expect: 100-continue\r\n\r\n"))
            let answer = LoopbackSocket.receive(fd, until: "}")
            #expect(!answer.contains("100 Continue"), "\(answer.debugDescription)")
            #expect(answer.hasPrefix(status), "\(answer.debugDescription)")
            #expect(mention.isEmpty || answer.contains(mention), "\(answer)")
        }
    }

    @Test("a connection that sends no request is closed at the request deadline")
    func silentConnectionCloses() async throws {
        try await withServer { port in
            let start = ContinuousClock.now
            let (answer, closed) = try exchange(port: port, "")
            #expect(answer.isEmpty)
            #expect(closed, "closed by the server, not left to the client's 5 s")
            #expect(ContinuousClock.now - start < .seconds(4))
        }
    }

    @Test("a request whose head or body does not finish is answered 408 at the deadline (a partial head too, RFC 9110 §15.5.9); a connection that sent nothing is closed silently")
    func unfinishedBodyTimesOut() async throws {
        let lines = Mutex<[String]>([])
        try await withServer(log: { line in lines.withLock { $0.append(line) } }) { port in
            let (answer, closed) = try exchange(
                port: port, "POST /authentication_finalize HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Length: 50\r\n\r\n{\"a\"")
            #expect(answer.hasPrefix("HTTP/1.1 408 Request Timeout\r\n"), "\(answer)")
            #expect(answer.hasSuffix(#"{"error":"the request was not complete within 0.3 s","verified":false}"#) && closed, "\(answer)")
            let (partial, partialClosed) = try exchange(port: port, "POST /authentication_finalize HTTP/1.1\r\nHost: 127.0")
            #expect(partial.hasPrefix("HTTP/1.1 408 Request Timeout\r\n") && partialClosed, "\(partial)")
            #expect(partial.hasSuffix(#"{"error":"the request was not complete within 0.3 s","verified":false}"#), "\(partial)")
            let (nothing, nothingClosed) = try exchange(port: port, "")
            #expect(nothing.isEmpty && nothingClosed, "\(nothing)")
        }
        // Each 408 is logged as what it was; neither reads as a request the parser could not read.
        let logged = lines.withLock { $0 }
        #expect(logged == [
            "refused POST /authentication_finalize: 408 the request was not complete within 0.3 s",
            "refused an incomplete request head: 408 the request was not complete within 0.3 s",
        ], "\(logged)")
    }

    @Test("a head over NIO's 80 KiB limit: 414 when the request line is, 431 when the header fields are; other parser errors 400; each logged")
    func overlongHeadsNamed() async throws {
        let lines = Mutex<[String]>([])
        try await withServer(log: { line in lines.withLock { $0.append(line) } }) { port in
            let long = String(repeating: "a", count: 90 * 1024)
            let (uri, uriClosed) = try exchange(port: port, "GET /\(long) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
            #expect(uri.hasPrefix("HTTP/1.1 414 URI Too Long\r\n") && uriClosed, "\(uri.prefix(200))")
            #expect(uri.hasSuffix(#"{"error":"the request line is over 80 KiB","verified":false}"#), "\(uri.prefix(200))")
            // Empty lines before the request line do not count toward it.
            let (led, _) = try exchange(port: port, "\r\n\r\nGET /\(long) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
            #expect(led.hasPrefix("HTTP/1.1 414 URI Too Long\r\n"), "\(led.prefix(200))")
            // NIO counts the target and the header fields together: a head over the limit with a
            // shorter request line is 431.
            let half = String(repeating: "b", count: 50 * 1024)
            let (mixed, _) = try exchange(port: port, "GET /\(half) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nX-Big: \(half)\r\n\r\n")
            #expect(mixed.hasPrefix("HTTP/1.1 431 Request Header Fields Too Large\r\n"), "\(mixed.prefix(200))")
            let (header, headerClosed) = try exchange(port: port, "GET / HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nX-Big: \(long)\r\n\r\n")
            #expect(header.hasPrefix("HTTP/1.1 431 Request Header Fields Too Large\r\n") && headerClosed, "\(header.prefix(200))")
            let (garbage, _) = try exchange(port: port, "GET / HTTP/1.1\r\nHo st: x\r\n\r\n")
            #expect(garbage.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(garbage)")
            #expect(garbage.contains("the HTTP parser cannot read the request"), "\(garbage)")
        }
        let logged = lines.withLock { $0 }
        #expect(logged.count == 5 && logged.first == "refused a request the HTTP parser cannot read: 414 the request line is over 80 KiB"
                && logged.dropFirst(3).first == "refused a request the HTTP parser cannot read: 431 the request head is over 80 KiB", "\(logged)")
    }

    @Test("a 404 quotes at most 200 characters of the path it did not know")
    func unknownPathCut() async throws {
        try await withServer { port in
            let (answer, _) = try exchange(port: port, "GET /\(String(repeating: "a", count: 5_000)) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
            #expect(answer.hasPrefix("HTTP/1.1 404"), "\(answer.prefix(200))")
            #expect(answer.count < 1_000 && answer.contains("a…"), "\(answer.count) characters: \(answer.prefix(300))")
        }
    }

    @Test("after a 100 Continue, a body the parser cannot read still gets its 400 (the interim answer is not the response)")
    func parserErrorAfterContinue() async throws {
        try await withServer { port in
            let (answer, closed) = try exchange(
                port: port,
                "POST /authentication_finalize HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
            #expect(answer.hasPrefix("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 400 Bad Request\r\n") && closed, "\(answer)")
            #expect(answer.contains("the chunked body's framing is malformed"), "\(answer)")
        }
    }

    @Test("JSON bodies: nesting past 32 is refused, a repeated member is refused, numbers beyond Double are refused")
    func jsonLimits() {
        let deep = { (levels: Int) in String(repeating: "[", count: levels) + String(repeating: "]", count: levels) }
        #expect(JSONValue.parse(Array(deep(JSONValue.maxDepth).utf8)) != nil)
        #expect(JSONValue.parse(Array(deep(JSONValue.maxDepth + 1).utf8)) == nil)
        // One name in two Unicode spellings (the Kelvin sign and K; é composed and decomposed) is a repeat.
        #expect(JSONValue.parse(Array("{\"publicKey\":1,\"public\u{212A}ey\":2}".utf8)) == nil)
        #expect(JSONValue.parse(Array("{\"caf\u{E9}\":1,\"cafe\u{301}\":2}".utf8)) == nil)
        #expect {
            try JSONValue.read(Array("{\"a\u{212A}\":1,\"aK\":2}".utf8))
        } throws: { error in
            "\(error)".contains("member \"aK\" is repeated in another Unicode spelling of the same name")
        }
        #expect(JSONValue.parse(Array(#"{"a":1,"a":2}"#.utf8)) == nil)
        #expect(JSONValue.parse(Array("[1e400]".utf8)) == nil)
        #expect(JSONValue.parse(Array(#"{"a":[1.5,true,null,"x\u00e9"]}"#.utf8)) == .object(["a": .array([.number(1.5), .bool(true), .null, .string("xé")])]))
    }

    @Test("a 1 MiB body of nests 32 deep parses (it took minutes with Decodable's trial of each type)")
    func wideNestedBodyParses() {
        let nest = String(repeating: "[", count: 31) + String(repeating: "]", count: 31)
        let body = "[" + Array(repeating: nest, count: (1 << 20) / (nest.utf8.count + 1)).joined(separator: ",") + "]"
        guard case .array(let elements) = JSONValue.parse(Array(body.utf8)) else {
            Issue.record("the body did not parse")
            return
        }
        #expect(elements.count == (1 << 20) / (nest.utf8.count + 1))
    }

    @Test("progress lines that quote a peer's text (a user name with a line break) stay one line each")
    func progressLinesEscaped() {
        let lines = LockedStrings()
        let output = ProgramOutput(standardOutput: { _ in }, standardError: { lines.append($0) })
        let forged = "ev\nrp: accepted the sign-in of root"
        DesktopNarrator(output: output, json: false).say("verified: \(forged) signed in")
        PhoneNarrator(output: output, json: false, relayURL: "", proximityURL: "", rssi: 0).say("signing in as \(forged)")
        #expect(lines.all == [
            #"verified: ev\u{A}rp: accepted the sign-in of root signed in"#, #"signing in as ev\u{A}rp: accepted the sign-in of root"#,
        ])
    }
}

extension RelyingPartyHTTPServerTests {
    @Test("the advert line names a tunnel domain other than 0 (a browser would look for the phone there); the event always carries it")
    func advertNamesItsDomain() {
        let lines = LockedStrings()
        let events = LockedStrings()
        let narrator = DesktopNarrator(output: ProgramOutput(standardOutput: { events.append($0) }, standardError: { lines.append($0) }), json: true)
        narrator.session(.advertAccepted(rssi: -45, domain: .google, ignored: 0))
        narrator.session(.advertAccepted(rssi: -50, domain: TunnelDomainID(rawValue: 256), ignored: 2))
        #expect(lines.all == [
            "advert accepted (rssi -45 dBm)",
            "advert accepted (rssi -50 dBm, 2 other datagram(s) ignored; tunnel domain 256, "
                + "\(TunnelDomainID(rawValue: 256).host ?? "") for a browser, joined on this desktop's relay)",
        ])
        #expect(events.all == [
            #"{"event":"advert","rssi":-45,"ignored":0,"domain":0}"#, #"{"event":"advert","rssi":-50,"ignored":2,"domain":256}"#,
        ])
    }
}

/// Lines collected from a callback.
private final class LockedStrings: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}
