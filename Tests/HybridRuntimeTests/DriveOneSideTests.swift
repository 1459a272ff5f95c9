import CTAP2
import Foundation
import HybridCore
import HybridRuntime
import Testing

/// The two recipes of HybridRuntime's GettingStarted ("Drive your own side"), through public API
/// only: HybridSim plays one side over a real relay and UDP proximity, the implementation under test
/// the other. Here the other side is HybridSim's own driver standing in, so that each recipe runs
/// as written (a recipe that stops compiling or working fails here first).
@Suite("Drive one side over loopback (GettingStarted recipes)", .serialized, .timeLimit(.minutes(1)))
struct DriveOneSideTests {
    static let relyingParty = RelyingParty(id: "example.com", origin: "https://example.com")

    static func registration() -> Ceremony.Registration {
        Ceremony.Registration(
            relyingParty: relyingParty, rpName: "Example",
            user: PublicKeyCredentialUserEntity(id: Array("alice".utf8), name: "alice", displayName: "Alice"),
            challenge: RandomSource.system.bytes(32))
    }

    @Test("test your phone: HybridSim is the desktop (relay, scanner, ClientDriver)")
    func desktopForYourPhone() async throws {
        let ceremony = Self.registration()
        // --- recipe: test your phone ---
        let relay = TunnelRelay(configuration: RelayConfiguration())
        let endpoint = try await relay.start()
        let session = ClientSession(requestType: .makeCredential, timestamp: UInt64(Date().timeIntervalSince1970))
        let scanner = ProximityScanner(matcher: ClientDriver.Transports.advertMatcher(eidKey: session.eidKey))
        let proximity = try await scanner.start()
        // Your phone gets session.url (the QR code), endpoint.url (its tunnel service) and proximity
        // (where it sends its 23-byte advert datagrams).
        let yourPhone = Task { try await Self.standInPhone(qrURL: session.url, relayURL: endpoint.url, proximity: proximity) }
        let outcome = try await ClientDriver.run(
            session: session, request: ceremony.requestBytes,
            transports: .loopback(relayURL: endpoint.url, scanner: scanner))
        let (credential, _) = try ceremony.verify(response: outcome.response, now: UInt64(Date().timeIntervalSince1970))
        await scanner.stop()
        await relay.shutdown()
        // --- end of recipe ---
        try await yourPhone.value
        #expect(credential.userId == Array("alice".utf8) && !credential.credentialId.isEmpty)
    }

    @Test("test your desktop: HybridSim is the phone (AuthenticatorSession from its QR code, AuthenticatorDriver)")
    func phoneForYourDesktop() async throws {
        let relay = TunnelRelay(configuration: RelayConfiguration())
        let endpoint = try await relay.start()
        let ceremony = Self.registration()
        let desktopSession = ClientSession(requestType: .makeCredential, timestamp: UInt64(Date().timeIntervalSince1970))
        let scanner = ProximityScanner(matcher: ClientDriver.Transports.advertMatcher(eidKey: desktopSession.eidKey))
        let proximity = try await scanner.start()
        let yourDesktop = Task {
            try await ClientDriver.run(
                session: desktopSession, request: ceremony.requestBytes,
                transports: .loopback(relayURL: endpoint.url, scanner: scanner))
        }
        let (qrURL, relayURL, scannerPort) = (desktopSession.url, endpoint.url, proximity.port)
        // --- recipe: test your desktop ---
        let phone = SimulatedPhone()
        let session = try AuthenticatorSession(qr: QRPayload(url: qrURL), getInfo: phone.getInfo)
        try await AuthenticatorDriver.run(
            session: session,
            transports: .loopback(relayURL: relayURL, proximity: ProximityEndpoint(host: "127.0.0.1", port: scannerPort))
        ) { request in
            phone.respond(to: request, now: UInt64(Date().timeIntervalSince1970))
        }
        // --- end of recipe ---
        let outcome = try await yourDesktop.value
        _ = try ceremony.verify(response: outcome.response, now: UInt64(Date().timeIntervalSince1970))
        #expect(phone.passkeys.count == 1)
        await scanner.stop()
        await relay.shutdown()
    }

    /// The phone under test in the first recipe, played by HybridSim's own phone.
    static func standInPhone(qrURL: String, relayURL: String, proximity: ProximityEndpoint) async throws {
        let phone = SimulatedPhone()
        let session = try AuthenticatorSession(qr: QRPayload(url: qrURL), getInfo: phone.getInfo)
        try await AuthenticatorDriver.run(session: session, transports: .loopback(relayURL: relayURL, proximity: proximity)) {
            phone.respond(to: $0, now: UInt64(Date().timeIntervalSince1970))
        }
    }
}
