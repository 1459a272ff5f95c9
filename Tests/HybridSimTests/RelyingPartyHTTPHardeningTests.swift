import CTAP2
import Foundation
import HybridCore
@testable import HybridSim
import HybridTestSupport
import NIOCore
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `hybrid-sim rp` against clients that try to make it slow for everyone, hold its memory, or get
/// past its checks with odd request targets and framing (the py_webauthn profile: its options
/// endpoints take a JSON body).
@Suite("Relying-party server: hardening against hostile HTTP clients", .timeLimit(.minutes(2)))
struct RelyingPartyHTTPHardeningTests {
    private static func service(log: @escaping @Sendable (String) -> Void = { _ in }, directory: TemporaryDirectory) throws -> RelyingPartyService {
        RelyingPartyService(
            profile: try RelyingPartyProfile.load("py_webauthn"),
            relyingParty: RelyingParty(id: "example.com", origin: "https://example.com"),
            store: RelyingPartyStore(path: directory.file("store.json")), log: log)
    }

    private func withServer(
        requestDeadline: TimeAmount = .seconds(5), bodyBudget: Int = RelyingPartyHTTPServer.maximumBodyBytesInFlight,
        log: @escaping @Sendable (String) -> Void = { _ in }, _ body: (Int) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try await RelyingPartyHTTPServer.start(
            service: try Self.service(log: log, directory: directory), port: 0, requestDeadline: requestDeadline, maximumConnections: 64,
            maximumBodyBytesInFlight: bodyBudget)
        do {
            try await body(server.port)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    /// Sends `request` and reads until the server closes (or 5 s pass).
    private func exchange(port: Int, _ request: String) throws -> LoopbackSocket.Exchange {
        try #require(LoopbackSocket.exchange(port: port, request), "cannot reach 127.0.0.1:\(port)")
    }

    /// A body of `members` members: about 10 bytes each.
    private static func wideObject(_ members: Int) -> [UInt8] {
        Array(("{" + (0..<members).map { #""\#(String($0, radix: 16))":0"# }.joined(separator: ",") + "}").utf8)
    }

    @Test("an options endpoint takes at most 16 KiB of body (413 beyond, announced or grown); a result endpoint still takes 1 MiB")
    func optionsBodyLimit() async throws {
        try await withServer { port in
            let head = "POST /generate-registration-options HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
            let announced = try exchange(port: port, head + "Content-Length: 20000\r\n\r\n")
            #expect(announced.status == 413 && announced.response.contains("larger than 16 KiB"), "\(announced.response)")
            let chunk = String(repeating: " ", count: 10_000)
            let grown = try exchange(
                port: port, head + "Transfer-Encoding: chunked\r\n\r\n2710\r\n\(chunk)\r\n2710\r\n\(chunk)\r\n0\r\n\r\n")
            #expect(grown.status == 413, "\(grown.response)")
            let small = try exchange(port: port, head + "Content-Length: 16\r\n\r\n{\"username\":\"a\"}")
            #expect(small.status == 200, "\(small.response)")
            let result = try exchange(
                port: port, "POST /verify-registration HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Length: 20000\r\n\r\n" + chunk + chunk)
            #expect(result.status == 400 && result.response.contains("not JSON"), "\(result.response.prefix(300))")
        }
    }

    @Test("an options body of another JSON type is described by its kind and size, not written out")
    func notAnObjectDescribed() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let rp = try Self.service(directory: directory)
        let array = Array(("[" + Array(repeating: "0", count: 5000).joined(separator: ",") + "]").utf8)
        let response = await rp.handle(RelyingPartyHTTPRequest(method: "POST", target: "/generate-registration-options", body: array))
        #expect(
            response.body["error"]?.stringValue
                == "the body must be a JSON object (the account name is a member of it), not an array of 5000 values",
            "\(response.body.text.prefix(200))")
        let name = await rp.handle(
            RelyingPartyHTTPRequest(method: "POST", target: "/generate-registration-options", body: Array(#"{"username":[1,2]}"#.utf8)))
        #expect(name.body["error"]?.stringValue == "the account name must be a JSON string, not an array of 2 values", "\(name.body.text)")
    }

    @Test("a large body is parsed outside the service's actor: an options call meanwhile is answered first")
    func largeBodyDoesNotHoldTheService() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let rp = try Self.service(directory: directory)
        let big = Self.wideObject(100_000)
        // The tasks' results arrive in the order the tasks finish.
        let order = await withTaskGroup(of: String.self) { group in
            group.addTask {
                _ = await rp.handle(RelyingPartyHTTPRequest(method: "POST", target: "/verify-registration", body: big))
                return "large"
            }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(50))
                let options = await rp.handle(
                    RelyingPartyHTTPRequest(method: "POST", target: "/generate-registration-options", body: Array(#"{"username":"a"}"#.utf8)))
                return "options \(options.status)"
            }
            var order: [String] = []
            for await label in group { order.append(label) }
            return order
        }
        #expect(order == ["options 200", "large"])
    }

    @Test("request bodies held at once are bounded across connections: past the budget a body is 503 with Retry-After, and a closed connection's bytes are given back")
    func bodyBudget() async throws {
        try await withServer(bodyBudget: 64 * 1024) { port in
            let head = "POST /verify-registration HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
            // Holds 60,000 bytes of the budget: its body is announced and never finished.
            let holder = try #require(LoopbackSocket.connect(port: port, ioTimeout: 5))
            #expect(LoopbackSocket.send(holder, head + "Content-Length: 60000\r\n\r\n" + String(repeating: " ", count: 1000)))
            try await Task.sleep(for: .milliseconds(200))
            let refused = try exchange(port: port, head + "Content-Length: 10000\r\n\r\n" + String(repeating: " ", count: 10_000))
            #expect(refused.status == 503 && refused.response.contains("\r\nRetry-After: 1\r\n"), "\(refused.response)")
            #expect(refused.response.contains("the request bodies held at once would pass 64 KiB"), "\(refused.response)")
            // A chunked body is counted as it arrives.
            let chunk = String(repeating: " ", count: 8000)
            let chunked = try exchange(port: port, head + "Transfer-Encoding: chunked\r\n\r\n1f40\r\n\(chunk)\r\n0\r\n\r\n")
            #expect(chunked.status == 503, "\(chunked.response)")
            close(holder)
            try await Task.sleep(for: .milliseconds(200))
            let served = try exchange(port: port, head + "Content-Length: 10000\r\n\r\n" + String(repeating: " ", count: 10_000))
            #expect(served.status == 400 && served.response.contains("not JSON"), "\(served.response)")
        }
    }

    @Test("a head with more than 100 header fields is 431 (NIO's parser counts none; 20,000 tiny fields cost 0.7 MB), and logged")
    func headerFieldsCounted() async throws {
        let lines = Mutex<[String]>([])
        try await withServer(log: { line in lines.withLock { $0.append(line) } }) { port in
            let head = "POST /generate-authentication-options HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
            let many = try exchange(port: port, head + String(repeating: "a: b\r\n", count: 100) + "\r\n")
            #expect(many.status == 431 && many.closed, "\(many.response)")
            #expect(many.response.contains(#"{"error":"the request head has more than 100 header fields","verified":false}"#), "\(many.response)")
            let enough = try exchange(port: port, head + String(repeating: "a: b\r\n", count: 98) + "Content-Length: 2\r\n\r\n{}")
            #expect(enough.status == 200, "\(enough.response.prefix(200))")
            // Whitespace before a value is not counted by NIO toward the head's 80 KiB: the raw bytes are.
            // (The head stops just past the bound: nothing is left unread for the close to reset.)
            let blank = try exchange(port: port, head + "X-Blank: " + String(repeating: " ", count: 91_000))
            #expect(blank.status == 431 && blank.response.contains("the request head is over 80 KiB"), "\(blank.response.prefix(300))")
        }
        #expect(lines.withLock { $0 } == [
            "refused a request head with too many header fields: 431 the request head has more than 100 header fields",
            "refused a request head too long: 431 the request head is over 80 KiB",
        ])
    }

    /// Sends `count` bytes of `byte` on `fd` without a SIGPIPE; the bytes sent before a send failed.
    private static func sendBody(_ fd: Int32, count: Int, byte: UInt8 = 0x20) -> Int {
        let chunk = [UInt8](repeating: byte, count: 64 * 1024)
        var sent = 0
        while sent < count {
            let wrote = chunk.withUnsafeBytes { send(fd, $0.baseAddress, min($0.count, count - sent), Int32(MSG_NOSIGNAL)) }
            guard wrote > 0 else { break }
            sent += wrote
        }
        return sent
    }

    @Test("a refusal before the body was read lingers: a client still sending 5 MB gets its 413 (and a 431 its answer), not a reset", arguments: [false, true])
    func refusalsLinger(head431: Bool) async throws {
        try await withServer { port in
            let fd = try #require(LoopbackSocket.connect(port: port, ioTimeout: 10))
            defer { close(fd) }
            let head = head431
                ? "POST /verify-registration HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nX-Big: "  // 5 MB of value follow
                : "POST /verify-registration HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Length: 5000000\r\n\r\n"
            #expect(LoopbackSocket.send(fd, head))
            let sent = Self.sendBody(fd, count: 5_000_000, byte: UInt8(ascii: "b"))
            let answer = LoopbackSocket.receive(fd, until: "\r\n\r\n")
            #expect(answer.hasPrefix(head431 ? "HTTP/1.1 431" : "HTTP/1.1 413"), "sent \(sent) bytes, answer: \(answer.prefix(200))")
            #expect(sent == 5_000_000)
        }
    }

    @Test("a target of another scheme is 421; one starting // or with a fragment is 400; a percent-encoded path is not decoded to match an endpoint")
    func oddTargets() async throws {
        try await withServer { port in
            let cases = [
                ("https://evil.example/generate-registration-options", 421),
                ("ftp://evil.example/generate-registration-options", 421),
                ("HTTPS://127.0.0.1:\(port)/generate-registration-options", 421),
                ("http://evil.example/generate-registration-options", 421),
                ("//evil.example/generate-registration-options", 400),
                ("/generate-registration-options#frag", 400),
                ("generate-registration-options", 400),
                ("/generate%2Dregistration%2Doptions", 404),
                ("http://127.0.0.1:\(port)/generate-registration-options", 200),
                ("/generate-registration-options", 200),
            ]
            for (target, status) in cases {
                let answer = try exchange(
                    port: port, "POST \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Length: 2\r\n\r\n{}")
                #expect(answer.status == status, "\(target): \(answer.response.prefix(300))")
                if status != 200 { #expect(!answer.response.contains("challenge"), "\(target): \(answer.response)") }
            }
        }
    }

    @Test("verdicts on results that name no challenge pending here are logged within the refusal budget (a burst of 20, then 2 a second)")
    func strayVerdictsRateLimited() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let lines = Mutex<[String]>([])
        let rp = try Self.service(log: { line in lines.withLock { $0.append(line) } }, directory: directory)
        let clientData = Base64URL.encode(Array(#"{"type":"webauthn.create","challenge":"AAAA","origin":"https://example.com"}"#.utf8))
        let unknown = #"{"username":"x","credential":{"id":"AA","rawId":"AA","type":"public-key","response":{"clientDataJSON":"\#(clientData)","attestationObject":"oA"}}}"#
        let unreadable = #"{"username":"x","credential":{"id":"AA","rawId":"AA","type":"public-key","response":{"clientDataJSON":"e30","attestationObject":"oA"}}}"#
        for body in Array(repeating: unknown, count: 30) + Array(repeating: unreadable, count: 30) {
            let response = await rp.handle(RelyingPartyHTTPRequest(method: "POST", target: "/verify-registration", body: Array(body.utf8)))
            #expect(response.status == 400)
        }
        let logged = lines.withLock { $0 }
        #expect(logged.count >= 20 && logged.count < 30, "\(logged.count) lines")
        #expect(logged.first?.hasPrefix("rejected a registration: unknown challenge AAAA") == true, "\(logged.first ?? "")")
    }

    @Test("chunk extensions count toward the request's size: megabytes of them in a chunked body of a few bytes are 413")
    func chunkExtensionsCounted() async throws {
        try await withServer { port in
            let fd = try #require(LoopbackSocket.connect(port: port, ioTimeout: 10))
            defer { close(fd) }
            #expect(LoopbackSocket.send(
                fd, "POST /generate-registration-options HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nTransfer-Encoding: chunked\r\n\r\n"))
            let block = "1;" + String(repeating: "e", count: 60_000) + "\r\nx\r\n"
            for _ in 0..<50 where LoopbackSocket.send(fd, block) {}
            let answer = LoopbackSocket.receive(fd, until: "}")
            #expect(answer.hasPrefix("HTTP/1.1 413"), "\(answer.prefix(300))")
            #expect(answer.contains("with its framing (chunk sizes and extensions count)"), "\(answer.prefix(300))")
        }
    }

    @Test("the parser's vague refusals get specific reasons: Content-Length with Transfer-Encoding, chunked twice or not last, HTTP/2's preface, bare-LF lines")
    func parserRefusalsNamed() async throws {
        try await withServer { port in
            let post = "POST /verify-registration HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
            let cases = [
                (post + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "Content-Length and Transfer-Encoding together"),
                (post + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", "Content-Length and Transfer-Encoding together"),
                (post + "Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", "names chunked more than once"),
                (post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "names chunked more than once"),
                (post + "Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n", "last coding is gzip, not chunked"),
                (post + "Content-Length: abc\r\n\r\n", "the HTTP parser cannot read the request (invalid character in content-length header)"),
                ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "HTTP/2 is not spoken here"),
                ("GET /generate-authentication-options HTTP/1.1\nHost: 127.0.0.1:\(port)\n\n", "ends with a bare LF"),
                (post + "Transfer-Encoding: chunked\r\n\r\nzz\r\n\r\n", "the chunked body's framing is malformed"),
            ]
            for (request, reason) in cases {
                let answer = try exchange(port: port, request)
                #expect(answer.status == 400 && answer.response.contains(reason), "\(request.debugDescription): \(answer.response)")
            }
        }
    }
}
