import CTAP2
import Foundation
import HybridCore

/// QR transactions with no sockets: the tunnel is an ``InMemoryTunnel`` pair and the advert travels
/// through memory, so the same drivers and state machines as over loopback run with no I/O at all
/// (no relay, no UDP, no event loop). The loopback harness (``HybridHarness/start(configuration:group:logger:)``)
/// is the one to use for the wire; these are for tests of the protocol logic that must not depend
/// on ports, and for injecting faults at the tunnel (`wrapPhone`, `wrapDesktop`).
extension HybridHarness {
    /// The routing ID the in-memory transactions' pretend relay hands the phone.
    public static let inMemoryRoutingID: [UInt8] = [0xA1, 0xB2, 0xC3]

    /// One QR transaction in memory: a desktop session showing a QR code, a phone that "scans" it,
    /// `request` (CTAP2: command ‖ CBOR) and the phone's answer. Returns the desktop's outcome once
    /// both sides finished, or throws the first side's error (a ``TransactionError``).
    ///
    /// - Parameters:
    ///   - request: the CTAP2 request the desktop sends.
    ///   - hint: the QR code's request-type hint.
    ///   - phone: the authenticator that answers.
    ///   - timeouts: both sides' limits.
    ///   - events: both sides' progress, as ``TransactionOptions/events``.
    ///   - wrapPhone: wraps the phone's end of the tunnel (a recorder, a fault injector).
    ///   - wrapDesktop: wraps the desktop's end of the tunnel.
    public static func transactInMemory(
        request: [UInt8], hint: QRPayload.RequestType, phone: SimulatedPhone, timeouts: SessionTimeouts = .fast,
        events: @escaping @Sendable (SessionEvent) -> Void = { _ in },
        wrapPhone: @escaping @Sendable (any TunnelTransport) -> any TunnelTransport = { $0 },
        wrapDesktop: @escaping @Sendable (any TunnelTransport) -> any TunnelTransport = { $0 }
    ) async throws -> ClientDriver.Outcome {
        let (phoneEnd, desktopEnd) = InMemoryTunnel.pair()
        let adverts = AdvertMailbox()
        let phoneTransports = AuthenticatorDriver.Transports(
            createTunnel: { _, _ in (wrapPhone(phoneEnd), inMemoryRoutingID) },
            advertise: { advert in
                adverts.post(advert)
                return NoAdvertisement()
            })
        let desktopTransports = ClientDriver.Transports(
            nextAdvert: { timeout in (try await adverts.next(timeout: timeout), ProximityDefaults.rssi, 0) },
            connect: { _, _, _ in wrapDesktop(desktopEnd) })
        let now: @Sendable () -> UInt64 = { UInt64(Date().timeIntervalSince1970) }
        let session = ClientSession(requestType: hint, timestamp: now())
        let phoneSession = try AuthenticatorSession(qr: QRPayload(url: session.url), getInfo: phone.getInfo)
        return try await runBoth(
            phone: {
                try await AuthenticatorDriver.run(
                    session: phoneSession, transports: phoneTransports, timeouts: timeouts, events: events
                ) { request in phone.respond(to: request, now: now()) }
            },
            desktop: {
                try await ClientDriver.run(
                    session: session, request: request, transports: desktopTransports, timeouts: timeouts, events: events)
            })
    }

    /// ``register(on:relyingParty:userName:userID:options:)`` in memory (``transactInMemory(request:hint:phone:timeouts:events:wrapPhone:wrapDesktop:)``):
    /// registers a new passkey for `userName` on `phone` and verifies it as `relyingParty`.
    public static func registerInMemory(
        on phone: SimulatedPhone, relyingParty: RelyingParty, userName: String, userID: [UInt8]? = nil,
        timeouts: SessionTimeouts = .fast
    ) async throws -> RegisteredCredential {
        let ceremony = registration(relyingParty: relyingParty, userName: userName, userID: userID)
        let outcome = try await transactInMemory(
            request: ceremony.requestBytes, hint: .makeCredential, phone: phone, timeouts: timeouts)
        return try ceremony.verify(response: outcome.response, now: UInt64(Date().timeIntervalSince1970)).credential
    }

    /// ``signIn(on:relyingParty:knownCredentials:allowCredentials:options:)`` in memory: signs in
    /// with a passkey on `phone`, verifies the assertion against `knownCredentials` and returns the
    /// credential with its new signature counter.
    public static func signInInMemory(
        on phone: SimulatedPhone, relyingParty: RelyingParty, knownCredentials: [RegisteredCredential],
        allowCredentials: [[UInt8]] = [], timeouts: SessionTimeouts = .fast
    ) async throws -> RegisteredCredential {
        let ceremony = authentication(relyingParty: relyingParty, allowCredentials: allowCredentials)
        let outcome = try await transactInMemory(
            request: ceremony.requestBytes, hint: .getAssertion, phone: phone, timeouts: timeouts)
        return try ceremony.verify(response: outcome.response, knownCredentials: knownCredentials).credential
    }
}
