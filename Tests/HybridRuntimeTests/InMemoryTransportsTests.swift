import CTAP2
import HybridCore
import HybridRuntime
import Synchronization
import Testing

/// ``HybridHarness/inMemoryTransports(routingID:rssi:wrapPhone:wrapDesktop:)``: what a library user
/// needs to build both sessions and run both drivers by hand with no socket, through public API only.
@Suite("In-memory transports for drivers run by hand")
struct InMemoryTransportsTests {
    private let relyingParty = RelyingParty(id: "memory.example", origin: "https://memory.example")

    @Test("a registration driven by hand: the desktop reads the advert at the given RSSI, joins at the given routing ID, and the result verifies")
    func registrationByHand() async throws {
        let transports = HybridHarness.inMemoryTransports(routingID: [0x01, 0x02, 0x03], rssi: -60)
        var desktopTransports = transports.desktop
        let paths = Mutex<[String]>([])
        let connect = desktopTransports.connect
        desktopTransports.connect = { path, domain, timeout in
            paths.withLock { $0.append(path) }
            return try await connect(path, domain, timeout)
        }
        let rssi = Mutex<Int8?>(nil)
        let phone = SimulatedPhone(random: .deterministic(seed: Array("by-hand".utf8)))
        let user = PublicKeyCredentialUserEntity(id: [9, 9], name: "hand", displayName: "Hand")
        let ceremony = Ceremony.Registration(
            relyingParty: relyingParty, rpName: nil, user: user, challenge: Array(repeating: 5, count: 32))
        let session = ClientSession(requestType: .makeCredential, timestamp: HybridHarness.reproducibleTime, random: .system)
        let phoneSession = try AuthenticatorSession(qr: QRPayload(url: session.url), getInfo: phone.getInfo, random: .system)
        async let phoneDone: Void = AuthenticatorDriver.run(
            session: phoneSession, transports: transports.phone, timeouts: .fast
        ) { request in phone.respond(to: request, now: HybridHarness.reproducibleTime) }
        let outcome = try await ClientDriver.run(
            session: session, request: ceremony.requestBytes, transports: desktopTransports, timeouts: .fast,
            events: { event in
                if case .advertAccepted(let seen, _, _) = event { rssi.withLock { $0 = seen } }
            })
        try await phoneDone
        let verified = try ceremony.verify(response: outcome.response, now: HybridHarness.reproducibleTime)
        #expect(phone.passkeys.map(\.credentialID) == [verified.credential.credentialId])
        #expect(rssi.withLock { $0 } == -60)
        let joined = try #require(paths.withLock { $0 }.first)
        #expect(joined.hasPrefix("/cable/connect/010203/"), "\(joined)")
    }

    @Test("a tunnel end wrapped by hand sees the tampering fail where it must; no phone: the desktop's advert wait ends with noNearbyAuthenticator")
    func tamperAndNoPhone() async throws {
        let flip: @Sendable (Int, [UInt8]) -> [UInt8]? = { number, message in
            guard number == 2 else { return message }
            var changed = message
            changed[changed.count / 2] ^= 0x01
            return changed
        }
        let transports = HybridHarness.inMemoryTransports(wrapDesktop: { RewritingTunnel($0, received: flip) })
        let phone = SimulatedPhone()
        let ceremony = Ceremony.Authentication(relyingParty: relyingParty, challenge: Array(repeating: 6, count: 32))
        let session = ClientSession(requestType: .getAssertion, timestamp: HybridHarness.reproducibleTime, random: .system)
        let phoneSession = try AuthenticatorSession(qr: QRPayload(url: session.url), getInfo: phone.getInfo, random: .system)
        let phoneTask = Task {
            try await AuthenticatorDriver.run(session: phoneSession, transports: transports.phone, timeouts: .fast) { request in
                phone.respond(to: request, now: HybridHarness.reproducibleTime)
            }
        }
        defer { phoneTask.cancel() }
        do {
            _ = try await ClientDriver.run(session: session, request: ceremony.requestBytes, transports: transports.desktop, timeouts: .fast)
            Issue.record("a tampered post-handshake message was accepted")
        } catch let error as TransactionError {
            #expect(error.side == .desktop && error.hybridCode == .decryptionFailed, "\(error)")
        }

        var timeouts = SessionTimeouts.fast
        timeouts.advert = .milliseconds(200)
        let lonely = HybridHarness.inMemoryTransports()
        do {
            _ = try await ClientDriver.run(
                session: ClientSession(requestType: .getAssertion, timestamp: HybridHarness.reproducibleTime, random: .system),
                request: ceremony.requestBytes, transports: lonely.desktop, timeouts: timeouts)
            Issue.record("a desktop with no phone succeeded")
        } catch let error as TransactionError {
            #expect(error.side == .desktop && error.runtimeCode == .noNearbyAuthenticator, "\(error)")
        }
    }
}
