import Foundation
@testable import HybridSim
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Testing

/// `desktop --rp-url https://…`: a development CA given with `--rp-ca` (or `SSL_CERT_FILE`) is
/// trusted, and a handshake that fails says why in words (Fixtures/tls: a test-only CA and a
/// certificate it signed for `localhost`).
@Suite("Relying-party client: TLS")
struct RelyingPartyTLSTests {
    private static let tls = OptionsFixtures.directory.appendingPathComponent("tls")
    private static let caFile = tls.appendingPathComponent("test-ca.pem").path

    /// A server on 127.0.0.1 answering every request with 200 `{}`: over TLS with the fixture's
    /// `localhost` certificate, or plain HTTP.
    private static func server(tls: Bool) async throws -> Channel {
        let context: NIOSSLContext? =
            tls
            ? try NIOSSLContext(
                configuration: .makeServerConfiguration(
                    certificateChain: try NIOSSLCertificate.fromPEMFile(Self.tls.appendingPathComponent("localhost.pem").path)
                        .map { .certificate($0) },
                    privateKey: .privateKey(try NIOSSLPrivateKey(file: Self.tls.appendingPathComponent("localhost.key").path, format: .pem))))
            : nil
        return try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let context { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context)) }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(EmptyJSONResponder())
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    /// The outcome of fetching hanko's registration options from `url`.
    private static func fetch(_ url: String, tls: TLSConfiguration?) async throws -> Result<[UInt8], ProgramFailure> {
        let client = try RelyingPartyClient(
            baseURL: url, profile: try RelyingPartyProfile.load("hanko"), environment: [:], timeout: .seconds(10), tls: tls)
        let ceremony = try client.profile.ceremony(registration: true)
        do {
            return .success(try await client.fetchOptions(ceremony, values: ["user": .string("carol")]))
        } catch {
            return .failure(error)
        }
    }

    /// A server (TLS or not) and the failure of fetching from it as `https://HOST:PORT` with `trusting`
    /// (`nil`: the system's roots); the failure is `nil` when the fetch succeeded (recorded as an issue).
    private static func failure(tls: Bool, host: String, trusting: TLSConfiguration?) async throws -> (Channel, ProgramFailure?) {
        let server = try await Self.server(tls: tls)
        let outcome = try await Self.fetch("https://\(host):\(server.localAddress!.port!)", tls: trusting)
        guard case .failure(let error) = outcome else {
            Issue.record("fetched from https://\(host) (TLS: \(tls)) without the expected failure")
            return (server, nil)
        }
        return (server, error)
    }

    @Test("a certificate from a CA outside the trust roots: 'not trusted … pass its CA with --rp-ca FILE', exit 6, no BoringSSL dump")
    func untrusted() async throws {
        let (server, error) = try await Self.failure(tls: true, host: "localhost", trusting: nil)
        #expect(error?.kind == .network)
        guard let error else { return }
        #expect(
            error.message.hasSuffix(
                ": the certificate of localhost is not trusted (CERTIFICATE_VERIFY_FAILED): pass its CA with --rp-ca FILE or add it to the system store"),
            "\(error.message)")
        #expect(!error.message.contains("BoringSSL"))
        try await server.close()
    }

    @Test("--rp-ca FILE, or SSL_CERT_FILE, trusts the development CA")
    func trustedCA() async throws {
        let server = try await Self.server(tls: true)
        let port = server.localAddress!.port!
        for environment in [[:], ["SSL_CERT_FILE": Self.caFile]] {
            let tls = try RelyingPartyTLS.configuration(caFile: environment.isEmpty ? Self.caFile : nil, environment: environment)
            let outcome = try await Self.fetch("https://localhost:\(port)", tls: tls)
            #expect((try? outcome.get()) == Array("{}".utf8), "\(outcome)")
        }
        try await server.close()
    }

    @Test("a trusted certificate for another name: 'does not name 127.0.0.1 (hostname mismatch)'")
    func hostnameMismatch() async throws {
        let (server, error) = try await Self.failure(
            tls: true, host: "127.0.0.1", trusting: try RelyingPartyTLS.configuration(caFile: Self.caFile, environment: [:]))
        #expect(error?.kind == .network)
        #expect(error?.message.contains("the certificate of 127.0.0.1 does not name 127.0.0.1 (hostname mismatch)") == true, "\(String(describing: error))")
        try await server.close()
    }

    @Test("https:// to a plain HTTP port: 'the server does not speak TLS on this port (WRONG_VERSION_NUMBER): use http://'")
    func plainHTTPPort() async throws {
        let (server, error) = try await Self.failure(tls: false, host: "127.0.0.1", trusting: nil)
        #expect(error?.kind == .network)
        guard let error else { return }
        #expect(
            error.message.hasSuffix(": the server does not speak TLS on this port (WRONG_VERSION_NUMBER): use http://"), "\(error.message)")
        try await server.close()
    }

    @Test("--rp-ca that is missing, a directory, or holds no PEM certificate: bad input before any connection; --rp-ca needs --rp-url")
    func badCAFile() throws {
        let notPEM = FileManager.default.temporaryDirectory.appendingPathComponent("rp-ca-\(UUID().uuidString).pem").path
        try Data("not a certificate\n".utf8).write(to: URL(fileURLWithPath: notPEM))
        defer { try? FileManager.default.removeItem(atPath: notPEM) }
        let broken = FileManager.default.temporaryDirectory.appendingPathComponent("rp-ca-\(UUID().uuidString).pem").path
        try Data("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".utf8).write(to: URL(fileURLWithPath: broken))
        defer { try? FileManager.default.removeItem(atPath: broken) }
        for (file, message) in [
            ("/nonexistent/ca.pem", "--rp-ca /nonexistent/ca.pem: no such file"),
            ("/tmp", "--rp-ca /tmp is a directory: give a PEM file of CA certificates"),
            (notPEM, "--rp-ca \(notPEM) holds no PEM certificate (-----BEGIN CERTIFICATE-----): give the CA's certificate in PEM"),
            (broken, "--rp-ca \(broken) holds a certificate that cannot be read: not valid PEM"),
        ] {
            var configuration = DesktopConfiguration()
            configuration.rpURL = "https://localhost:8443"
            configuration.rpProfile = "hanko"
            configuration.rpCA = file
            let error = #expect(throws: ProgramFailure.self) { try configuration.validateRelyingPartyLink() }
            #expect(error?.kind == .badInput)
            #expect(error?.message == message)
        }
        var configuration = DesktopConfiguration()
        configuration.rpCA = Self.caFile
        let error = #expect(throws: ProgramFailure.self) { try configuration.validateRelyingPartyLink() }
        #expect(error?.message == "--rp-ca needs --rp-url")
    }

    @Test("BoringSSL's reason code is taken from its error text")
    func reasonCode() {
        let text = "handshakeFailed(NIOSSL.BoringSSLError.sslError([Error: 268435581 error:1000007d:SSL routines:OPENSSL_internal:TLSV1_ALERT_PROTOCOL_VERSION at /x/handshake.cc:320]))"
        #expect(RelyingPartyTLS.boringSSLCode(in: text) == "TLSV1_ALERT_PROTOCOL_VERSION")
        #expect(RelyingPartyTLS.boringSSLCode(in: "no code") == nil)
    }
}

/// Answers every request with 200 and the body `{}`.
private final class EmptyJSONResponder: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = unwrapInboundIn(data) else { return }
        let body = context.channel.allocator.buffer(string: "{}")
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: "\(body.readableBytes)")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}
