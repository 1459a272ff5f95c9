import Foundation
import HybridSim
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

    @Test("a server that accepts and never answers: 'no answer within 1 s', a network failure")
    func silentServer() async throws {
        let (holder, port) = try EndToEndLab.boundSocket(listening: true)
        defer { close(holder) }
        let error = try await Self.fetchFailure(port: port, timeout: .seconds(1))
        #expect(error?.kind == .network)
        #expect(error?.message.hasPrefix("cannot reach the relying party at http://127.0.0.1:\(port)/") == true)
        #expect(error?.message.hasSuffix(": no answer within 1 s") == true, "\(error?.message ?? "")")
    }

    @Test("nothing listening: the system's reason, 'connection refused' (the client retries until its connect timeout), not NIO's errno text")
    func refused() async throws {
        let (holder, port) = try EndToEndLab.boundSocket(listening: false)
        defer { close(holder) }
        let error = try await Self.fetchFailure(port: port, connectTimeout: .seconds(1))
        #expect(error?.kind == .network)
        #expect(error?.message.hasSuffix(": connection refused") == true, "\(error?.message ?? "")")
    }

    @Test("a server that reads the request and closes without answering: said so")
    func closedWithoutAnswer() async throws {
        let (listener, port) = try EndToEndLab.boundSocket(listening: true)
        let closer = Thread {
            // Reads each request, then closes (a FIN, not a reset of unread data), until the
            // listener goes.
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let fd = accept(listener, nil, nil)
                guard fd >= 0 else { return }
                _ = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                close(fd)
            }
        }
        closer.start()
        defer { shutdown(listener, Int32(SHUT_RDWR)); close(listener) }
        let error = try await Self.fetchFailure(port: port)
        #expect(error?.kind == .network)
        #expect(error?.message.hasSuffix(": the server closed the connection without answering") == true, "\(error?.message ?? "")")
    }

    @Test("an error answer with line breaks and terminal escapes stays one escaped line (no forged `error:` line, no repainting)")
    func answerIsEscaped() async throws {
        let (listener, port) = try EndToEndLab.boundSocket(listening: true)
        let body = "\u{1B}[31mDENIED\u{1B}[0m\nerror: forged second line\n"
        let response = Array("HTTP/1.1 400 Bad Request\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)".utf8)
        let answerer = Thread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let fd = accept(listener, nil, nil)
                guard fd >= 0 else { return }
                _ = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                _ = response.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
                close(fd)
            }
        }
        answerer.start()
        defer { shutdown(listener, Int32(SHUT_RDWR)); close(listener) }
        let message = try await Self.fetchFailure(port: port)?.message ?? ""
        #expect(!message.contains("\n") && !message.contains("\u{1B}"), "\(message)")
        #expect(message.hasSuffix(": \\u{1B}[31mDENIED\\u{1B}[0m\\u{A}error: forged second line"), "\(message)")
    }
}
