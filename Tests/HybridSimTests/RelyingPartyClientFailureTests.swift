import Foundation
@testable import HybridSim
import HybridTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `--rp-url` failures in words: a header that cannot be sent is bad input before any connection,
/// and a call that fails says why (the system's reason, or which limit ran out), not the HTTP
/// client's type names.
@Suite("Relying-party client: failures")
struct RelyingPartyClientFailureTests {
    @Test("a header with a line break or a name that is not a token, given or from the environment: bad input, before any connection")
    func badHeaders() throws {
        let hanko = try RelyingPartyProfile.load("hanko")
        for (header, message) in [
            ("X: a\r\nInjected: 1", "--rp-header X: the value holds a control character (a line break would start another header)"),
            ("Bad Name: 1", "--rp-header Bad Name: not a header name (letters, digits and !#$%&'*+-.^_`|~ only)"),
        ] {
            let error = #expect(throws: ProgramFailure.self) {
                _ = try RelyingPartyClient(baseURL: "http://127.0.0.1:1", profile: hanko, extraHeaders: [header], environment: [:])
            }
            #expect(error?.kind == .badInput)
            #expect(error?.message == message)
        }
        // The okta profile's Authorization is "Bearer ${OKTA_ACCESS_TOKEN}": the variable is checked too.
        let error = #expect(throws: ProgramFailure.self) {
            _ = try RelyingPartyClient(
                baseURL: "http://127.0.0.1:1", profile: try RelyingPartyProfile.load("okta"),
                environment: ["OKTA_ACCESS_TOKEN": "token\r\nX-Injected: 1"])
        }
        #expect(error?.kind == .badInput)
        #expect(
            error?.message
                == "the okta profile's header Authorization: the value holds a control character (a line break would start another header)")
    }

    /// The failure of fetching hanko's registration options from 127.0.0.1:`port`.
    private static func fetchFailure(
        port: Int, timeout: Duration = .seconds(30), connectTimeout: Duration = .seconds(5)
    ) async throws -> ProgramFailure? {
        let client = try RelyingPartyClient(
            baseURL: "http://127.0.0.1:\(port)", profile: try RelyingPartyProfile.load("hanko"), environment: [:],
            timeout: timeout, connectTimeout: connectTimeout)
        let ceremony = try client.profile.ceremony(registration: true)
        return await #expect(throws: ProgramFailure.self) {
            _ = try await client.fetchOptions(ceremony, values: ["user": .string("carol")])
        }
    }

    @Test("a server that accepts and never answers: 'did not answer within 1 s', a timeout (exit 3), not a network failure")
    func silentServer() async throws {
        let (holder, port) = try EndToEndLab.boundSocket(listening: true)
        defer { close(holder) }
        let error = try await Self.fetchFailure(port: port, timeout: .seconds(1))
        #expect(error?.kind == .timeout)
        #expect(error?.message.hasPrefix("the relying party at http://127.0.0.1:\(port)/") == true)
        #expect(error?.message.hasSuffix(" did not answer within 1 s") == true, "\(error?.message ?? "")")
    }

    @Test(
        "a server whose accept queue is full (its SYNs are dropped): 'could not connect within' the shorter of the connect timeout and the whole request's limit, a timeout (exit 3)",
        arguments: [
            (Duration.seconds(3), Duration.seconds(1)),  // the connect timeout runs out first
            (.seconds(1), .seconds(5)),  // the whole request's limit is shorter: the connect timeout is cut to it
        ])
    func connectTimeout(timeout: Duration, connectTimeout: Duration) async throws {
        let (holder, port) = try EndToEndLab.boundSocket(listening: true)  // backlog 1, never accepting
        defer { close(holder) }
        // Two connections fill Linux's queue for a backlog of 1; the client's handshake then waits.
        let fillers = [LoopbackSocket.connect(port: port), LoopbackSocket.connect(port: port)].compactMap { $0 }
        defer { for fd in fillers { close(fd) } }
        try #require(fillers.count == 2)
        let started = ContinuousClock.now
        let error = try await Self.fetchFailure(port: port, timeout: timeout, connectTimeout: connectTimeout)
        #expect(ContinuousClock.now - started < .seconds(4), "waited past the limit")
        #expect(error?.kind == .timeout)
        #expect(error?.message.hasSuffix(": could not connect within 1 s") == true, "\(error?.message ?? "")")
    }

    @Test("nothing listening: the system's reason, 'connection refused', at once (no retries until the connect timeout), not NIO's errno text")
    func refused() async throws {
        let (holder, port) = try EndToEndLab.boundSocket(listening: false)
        defer { close(holder) }
        let started = ContinuousClock.now
        let error = try await Self.fetchFailure(port: port, connectTimeout: .seconds(20))
        // Retrying would take the whole 20 s; a refusal on loopback takes milliseconds.
        #expect(ContinuousClock.now - started < .seconds(10), "the refusal waited out the connect timeout")
        #expect(error?.kind == .network)
        #expect(error?.message.hasSuffix(": connection refused") == true, "\(error?.message ?? "")")
    }

    @Test("a server that reads the request and closes without answering: said so")
    func closedWithoutAnswer() async throws {
        let server = try Self.answering(nil)
        defer { server.stop() }
        let error = try await Self.fetchFailure(port: server.port)
        #expect(error?.kind == .network)
        #expect(error?.message.hasSuffix(": the server closed the connection without answering") == true, "\(error?.message ?? "")")
    }

    @Test("an error answer with line breaks and terminal escapes stays one escaped line (no forged `error:` line, no repainting)")
    func answerIsEscaped() async throws {
        let body = "\u{1B}[31mDENIED\u{1B}[0m\nerror: forged second line\n"
        let server = try Self.answering("HTTP/1.1 400 Bad Request\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
        defer { server.stop() }
        let message = try await Self.fetchFailure(port: server.port)?.message ?? ""
        #expect(!message.contains("\n") && !message.contains("\u{1B}"), "\(message)")
        #expect(message.hasSuffix(": \\u{1B}[31mDENIED\\u{1B}[0m\\u{A}error: forged second line"), "\(message)")
    }

    /// A server that reads each request and answers it with `response` (`nil`: none), then closes
    /// (a FIN, not a reset of unread data), on a thread, until the listener goes.
    private static func answering(_ response: String?) throws -> (port: Int, stop: () -> Void) {
        let bytes = Array((response ?? "").utf8)
        return try serving { fd in _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
    }

    /// A server that reads each request, runs `answer` on its connection and closes it, on a
    /// thread, until the listener goes.
    private static func serving(_ answer: @escaping @Sendable (CInt) -> Void) throws -> (port: Int, stop: () -> Void) {
        try serving { fd, _ in answer(fd) }
    }

    /// A server that reads each request (its first 4 KiB, the head of a small request), runs
    /// `answer` on its connection with the text read, and closes it, on a thread, until the
    /// listener goes.
    static func serving(_ answer: @escaping @Sendable (CInt, String) -> Void) throws -> (port: Int, stop: () -> Void) {
        let (listener, port) = try EndToEndLab.boundSocket(listening: true)
        let answerer = Thread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let fd = accept(listener, nil, nil)
                guard fd >= 0 else { return }
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                answer(fd, String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self))
                close(fd)
            }
        }
        answerer.start()
        return (port, { shutdown(listener, Int32(SHUT_RDWR)); close(listener) })
    }

    @Test("a body sent a byte at a time ends at the whole request's limit: 'did not finish its answer within 1 s', a timeout (exit 3)")
    func slowBody() async throws {
        let server = try Self.serving { fd in
            let head = Array("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n".utf8)
            guard send(fd, head, head.count, Int32(MSG_NOSIGNAL)) == head.count else { return }
            for _ in 0..<100 {
                usleep(300_000)
                guard send(fd, [UInt8(ascii: "x")], 1, Int32(MSG_NOSIGNAL)) == 1 else { return }
            }
        }
        defer { server.stop() }
        let started = ContinuousClock.now
        let error = try await Self.fetchFailure(port: server.port, timeout: .seconds(1))
        #expect(ContinuousClock.now - started < .seconds(5), "the slow body held the call past its limit")
        #expect(error?.kind == .timeout)
        #expect(error?.message.hasSuffix(" did not finish its answer within 1 s") == true, "\(error?.message ?? "")")
    }

    @Test(
        "an answer that arrived and cannot be used is the relying party's failure (exit 1) said in words, not 'cannot reach' (exit 6)",
        arguments: [
            ("HTTP/1.1 200 OK\r\nContent-Length: 2000000\r\nConnection: close\r\n\r\n" + String(repeating: "a", count: 2_000_000),
             " answered with more than 1 MiB, the most the desktop reads"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nabc", " closed the connection in the middle of its answer"),
            ("HTTP/1.1 2000 Odd\r\nContent-Length: 0\r\n\r\n", " sent an answer that is not HTTP ("),
            // Every answer sends the client back to /loop.
            ("HTTP/1.1 302 Found\r\nLocation: /loop\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", " redirected in a loop"),
        ])
    func unusableAnswer(response: String, ending: String) async throws {
        let server = try Self.answering(response)
        defer { server.stop() }
        let error = try await Self.fetchFailure(port: server.port, timeout: .seconds(10))
        #expect(error?.kind == .failed && error?.exitCode == 1, "\(String(describing: error))")
        #expect(error?.message.contains(ending) == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("cannot reach") == false, "\(error?.message ?? "")")
    }

    @Test("an answer after a redirect is named with the URL it came from, not only the first")
    func redirectedAnswerNamesItsURL() async throws {
        let count = Mutex(0)
        let server = try Self.serving { fd in
            let first = count.withLock { count in
                count += 1
                return count == 1
            }
            let answer = first
                ? "HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                : "HTTP/1.1 400 Bad Request\r\nContent-Length: 2\r\nConnection: close\r\n\r\nno"
            _ = Array(answer.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        defer { server.stop() }
        let error = try await Self.fetchFailure(port: server.port, timeout: .seconds(10))
        #expect(error?.message.contains("(redirected to GET http://127.0.0.1:\(server.port)/elsewhere)") == true, "\(error?.message ?? "")")
    }

    @Test("a 200 without the success rule's member says what the rule wanted: not JSON, no member, not true; a UTF-8 byte-order mark is dropped; a 201 where the rule wants 200 names the rule's status")
    func verdictSaysWhy() async throws {
        for (statusLine, body, why) in [
            ("200 OK", "OK", "the profile's success rule wants a JSON body with \"verified\": true; this body is not JSON"),
            ("200 OK", #"{"status":"ok"}"#, "the profile's success rule wants \"verified\": true; the body has no \"verified\" member"),
            ("200 OK", #"{"verified":"yes"}"#, "the profile's success rule wants \"verified\": true; the body has \"verified\" but not true"),
            ("200 OK", #"{"verified":true}"#, nil),
            ("200 OK", "\u{FEFF}" + #"{"verified":true}"#, nil),
            ("201 Created", #"{"verified": true}"#, "the profile's success rule wants HTTP status 200, not 201"),
            // An error status says why itself.
            ("400 Bad Request", #"{"error": "bad signature"}"#, nil),
        ] {
            let server = try Self.answering("HTTP/1.1 \(statusLine)\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
            defer { server.stop() }
            let client = try RelyingPartyClient(
                baseURL: "http://127.0.0.1:\(server.port)", profile: try RelyingPartyProfile.load("simplewebauthn"), environment: [:])
            let verdict = try await client.submit(
                try client.profile.ceremony(registration: true), values: ["credential": .object([:]), "user": .string("carol")])
            #expect(verdict.accepted == (why == nil && statusLine.hasPrefix("200")) && verdict.why == why, "\(body): \(verdict)")
            if statusLine.hasPrefix("201") {
                let failure = DesktopRelyingPartyLink.failure(verdict, what: "registration", source: "POST /verify-registration")
                #expect(failure.exitCode == 5)
                #expect(
                    failure.message
                        == #"the relying party rejected the registration (POST /verify-registration answered HTTP 201): {"verified": true} (the profile's success rule wants HTTP status 200, not 201)"#)
            }
        }
    }

    @Test("a refused verify is a rejection (exit 5) with the rule's reason; a 5xx is the server failing (exit 1), not a verdict")
    func verdictFailureKinds() {
        let rejected = DesktopRelyingPartyLink.failure(
            .init(accepted: false, status: 200, body: "OK", why: "the rule"), what: "registration", source: "POST /v")
        #expect(rejected.kind == .verificationFailed && rejected.exitCode == 5)
        #expect(rejected.message == "the relying party rejected the registration (POST /v answered HTTP 200): OK (the rule)")
        let crashed = DesktopRelyingPartyLink.failure(
            .init(accepted: false, status: 502, body: "Bad Gateway"), what: "sign-in", source: "POST /v")
        #expect(crashed.kind == .failed && crashed.exitCode == 1)
        #expect(crashed.message == "the relying party failed while verifying the sign-in (POST /v answered HTTP 502): Bad Gateway")
        #expect(RelyingPartyClient.either([200]) == "200" && RelyingPartyClient.either([200, 201, 204]) == "200, 201 or 204")
    }
}
