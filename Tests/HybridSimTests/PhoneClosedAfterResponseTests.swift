import CTAP2
import Foundation
import HybridCore
import HybridRuntime
import HybridSim
import Synchronization
import Testing

/// `hybrid-sim phone` (a process) against a desktop that, like a revision 0 desktop or an
/// independent Python client, closes the WebSocket normally after reading the response instead of
/// sending the encrypted shutdown message.
@Suite("Phone process: a desktop that closes without a shutdown message", .serialized)
struct PhoneClosedAfterResponseTests {
    @Test("the phone registers, sees the normal close, notes it on stderr and exits 0")
    func closeWithoutShutdown() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let relay = TunnelRelay(host: "127.0.0.1", port: 0)
        let relayURL = try await relay.start().url
        let session = ClientSession(requestType: .makeCredential, timestamp: UInt64(Date().timeIntervalSince1970))
        let scanner = ProximityScanner<[UInt8]>(
            port: 0, matcher: ClientDriver.Transports.advertMatcher(eidKey: session.keys.eidKey))
        let proximity = try await scanner.start()
        let phone = try lab.start(
            "phone", ["phone", "--qr", session.url, "--relay", relayURL, "--proximity", proximity.description])

        let rp = RelyingParty(id: "example.com", origin: "https://example.com")
        let registration = Ceremony.Registration(
            relyingParty: rp, rpName: "Example",
            user: PublicKeyCredentialUserEntity(id: [7, 7, 7], name: "frank", displayName: "Frank"),
            challenge: RandomSource.system.bytes(32))
        let loopback = ClientDriver.Transports.loopback(relayURL: relayURL, scanner: scanner)
        // The desktop's third message is its shutdown: close the WebSocket (1000) instead.
        let transports = ClientDriver.Transports(
            nextAdvert: loopback.nextAdvert,
            connect: { path, domain, timeout in
                CloseInsteadOfShutdown(inner: try await loopback.connect(path, domain, timeout))
            })
        let outcome = try await ClientDriver.run(
            session: session, request: registration.requestBytes, transports: transports,
            timeouts: SessionTimeouts(advert: .seconds(20), handshake: .seconds(20), userAction: .seconds(20)))
        let credential = try registration.verify(response: outcome.response, now: 0).credential
        #expect(credential.userId == [7, 7, 7])

        #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")
        #expect(
            phone.standardError.text.contains("the desktop sent no shutdown message after the response ("),
            "\(phone.transcript)")
        #expect(!phone.standardError.text.contains("error:"))
        await scanner.stop()
        await relay.shutdown()
    }
}

/// Sends the first two messages (handshake, request); the third (kShutdown) becomes a normal close.
private final class CloseInsteadOfShutdown: TunnelTransport {
    let inner: any TunnelTransport
    private let sent = Mutex(0)

    init(inner: any TunnelTransport) { self.inner = inner }

    func send(_ message: [UInt8]) async throws {
        let count = sent.withLock { value -> Int in
            value += 1
            return value
        }
        if count >= 3 {
            await inner.close()
            return
        }
        try await inner.send(message)
    }

    func receive(timeout: Duration) async throws -> [UInt8] { try await inner.receive(timeout: timeout) }

    func receiveIfReady() -> [UInt8]? { inner.receiveIfReady() }

    func close(code: WebSocketCloseCode, reason: String) async { await inner.close(code: code, reason: reason) }
}
