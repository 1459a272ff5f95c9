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
    @Test("a header with a line break or a name that is not a token: bad input, before any connection")
    func badHeaders() throws {
        let profile = try RelyingPartyProfile.load("hanko")
        for (header, message) in [
            ("X: a\r\nInjected: 1", "--rp-header X: the value holds a control character (a line break would start another header)"),
            ("Bad Name: 1", "--rp-header Bad Name: not a header name (letters, digits and !#$%&'*+-.^_`|~ only)"),
        ] {
            let error = #expect(throws: ProgramFailure.self) {
                _ = try RelyingPartyClient(baseURL: "http://127.0.0.1:1", profile: profile, extraHeaders: [header], environment: [:])
            }
            #expect(error?.kind == .badInput)
            #expect(error?.message == message)
        }
    }

    @Test("a server that accepts and never answers: 'no answer within 1 s', exit 6")
    func silentServer() async throws {
        let (holder, port) = try EndToEndLab.boundSocket(listening: true)
        defer { close(holder) }
        let client = try RelyingPartyClient(
            baseURL: "http://127.0.0.1:\(port)", profile: try RelyingPartyProfile.load("hanko"), environment: [:],
            timeout: .seconds(1))
        let ceremony = try client.profile.ceremony(registration: true)
        let error = await #expect(throws: ProgramFailure.self) {
            _ = try await client.fetchOptions(ceremony, values: ["user": .string("carol")])
        }
        #expect(error?.kind == .network)
        #expect(error?.message.hasSuffix(": no answer within 1 s") == true, "\(error?.message ?? "")")
    }

    @Test("nothing listening: the system's reason, 'connection refused'")
    func refused() async throws {
        let (holder, port) = try EndToEndLab.boundSocket(listening: false)
        defer { close(holder) }
        let client = try RelyingPartyClient(
            baseURL: "http://127.0.0.1:\(port)", profile: try RelyingPartyProfile.load("hanko"), environment: [:],
            connectTimeout: .seconds(1))
        let ceremony = try client.profile.ceremony(registration: true)
        let error = await #expect(throws: ProgramFailure.self) {
            _ = try await client.fetchOptions(ceremony, values: ["user": .string("carol")])
        }
        #expect(error?.kind == .network)
        let message = error?.message ?? ""
        #expect(
            message.hasSuffix(": connection refused") || message.hasSuffix(": could not connect within 1 s"),
            "\(message)")
        #expect(!message.contains("errno"), "\(message)")
    }
}
