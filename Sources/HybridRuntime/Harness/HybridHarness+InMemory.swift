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

    /// The time (seconds since 1970) a seeded in-memory transaction's sides read instead of the
    /// clock: 2026-01-01T00:00:00Z.
    public static let reproducibleTime: UInt64 = 1_767_225_600

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
    ///   - seed: `nil` (the default): both sessions draw from `RandomSource.system` and read the
    ///     clock. Given: each session draws from its own `RandomSource.deterministic(seed:)`
    ///     stream of `seed` (so the two sides' concurrent draws cannot interleave differently) and
    ///     the clock reads ``reproducibleTime``: with a fixed `request` and a `phone` built with a
    ///     seeded `random` too, every message is the same on every run, except what carries an
    ///     ECDSA signature (an assertion, a packed attestation): swift-crypto's signatures are
    ///     randomized, so check those by verifying them.
    ///   - linking: the phone's linking identity, when the transaction should link (the QR code
    ///     then says the desktop supports linking, QR key 4, and the phone sends its linking
    ///     information in the update message): what ``registerAndLinkInMemory(on:relyingParty:userName:timeouts:)``
    ///     passes. `nil` (the default): no linking, and the QR code says so.
    public static func transactInMemory(
        request: [UInt8], hint: QRPayload.RequestType, phone: some HarnessAuthenticator, timeouts: SessionTimeouts = .fast,
        events: @escaping @Sendable (SessionEvent) -> Void = { _ in },
        wrapPhone: @escaping @Sendable (any TunnelTransport) -> any TunnelTransport = { $0 },
        wrapDesktop: @escaping @Sendable (any TunnelTransport) -> any TunnelTransport = { $0 },
        seed: [UInt8]? = nil, linking: AuthenticatorSession.LinkingIdentity? = nil
    ) async throws -> ClientDriver.Outcome {
        var relay = InMemoryRelay()
        relay.wrapPhone = wrapPhone
        relay.wrapDesktop = wrapDesktop
        let sides = try inMemorySides(
            request: request, hint: hint, phone: phone, timeouts: timeouts, phoneEvents: events, desktopEvents: events,
            relay: relay, seed: seed, linking: linking)
        return try await runBoth(phone: sides.phone, desktop: sides.desktop)
    }

    /// The pretend relay of an in-memory transaction, with what the package's own tests look at:
    /// the routing ID it hands out, the paths each side asked for, and the tunnel wrappers.
    package struct InMemoryRelay: Sendable {
        /// The routing ID the phone gets for its new tunnel.
        package var routingID: [UInt8] = HybridHarness.inMemoryRoutingID
        /// The signal strength the desktop reads the advert at.
        package var rssi: Int8 = ProximityDefaults.rssi
        /// Called with the path the phone opens (`/cable/new/…`).
        package var created: @Sendable (String) -> Void = { _ in }
        /// Called with the path the desktop joins (`/cable/connect/…`).
        package var joined: @Sendable (String) -> Void = { _ in }
        /// Wraps the phone's end of the tunnel.
        package var wrapPhone: @Sendable (any TunnelTransport) -> any TunnelTransport = { $0 }
        /// Wraps the desktop's end of the tunnel.
        package var wrapDesktop: @Sendable (any TunnelTransport) -> any TunnelTransport = { $0 }

        package init() {}
    }

    /// Both drivers' transports for one QR transaction with no sockets (``inMemoryTransports(routingID:rssi:wrapPhone:wrapDesktop:)``).
    public struct InMemoryTransports: Sendable {
        /// The phone's: `createTunnel` hands out its end of an ``InMemoryTunnel`` pair with the
        /// routing ID; `advertise` posts the advert to the desktop (stopping it does nothing).
        public let phone: AuthenticatorDriver.Transports
        /// The desktop's: `nextAdvert` waits for the phone's advert (throwing `noNearbyAuthenticator`
        /// when none comes in time) and reports it with the RSSI; `connect` hands out the other end.
        public let desktop: ClientDriver.Transports
    }

    /// The transports ``transactInMemory(request:hint:phone:timeouts:events:wrapPhone:wrapDesktop:seed:linking:)``
    /// gives its two drivers, for a test that builds the sessions and runs
    /// ``ClientDriver/run(session:request:transports:timeouts:events:outcomeReady:)`` and
    /// ``AuthenticatorDriver/run(session:transports:timeouts:events:respond:)`` itself (its own
    /// randomness, clock, responder or events). They serve one transaction: each side's end of the
    /// tunnel is made once, here.
    ///
    /// - Parameters:
    ///   - routingID: the routing ID the pretend relay hands the phone (it goes into the advert).
    ///   - rssi: the signal strength the desktop reads the advert at.
    ///   - wrapPhone: wraps the phone's end of the tunnel (a ``RewritingTunnel``, a recorder).
    ///   - wrapDesktop: wraps the desktop's end.
    public static func inMemoryTransports(
        routingID: [UInt8] = inMemoryRoutingID, rssi: Int8 = ProximityDefaults.rssi,
        wrapPhone: @escaping @Sendable (any TunnelTransport) -> any TunnelTransport = { $0 },
        wrapDesktop: @escaping @Sendable (any TunnelTransport) -> any TunnelTransport = { $0 }
    ) -> InMemoryTransports {
        var relay = InMemoryRelay()
        relay.routingID = routingID
        relay.rssi = rssi
        relay.wrapPhone = wrapPhone
        relay.wrapDesktop = wrapDesktop
        return inMemoryTransports(relay: relay)
    }

    /// ``inMemoryTransports(routingID:rssi:wrapPhone:wrapDesktop:)`` with the pretend relay's hooks.
    package static func inMemoryTransports(relay: InMemoryRelay) -> InMemoryTransports {
        let (phoneEnd, desktopEnd) = InMemoryTunnel.pair()
        let adverts = AdvertMailbox()
        let phone = AuthenticatorDriver.Transports(
            createTunnel: { path, _ in
                relay.created(path)
                return (relay.wrapPhone(phoneEnd), relay.routingID)
            },
            advertise: { advert in
                adverts.post(advert)
                return NoAdvertisement()
            })
        let desktop = ClientDriver.Transports(
            nextAdvert: { timeout in (try await adverts.next(timeout: timeout), relay.rssi, 0) },
            connect: { path, _, _ in
                relay.joined(path)
                return relay.wrapDesktop(desktopEnd)
            })
        return InMemoryTransports(phone: phone, desktop: desktop)
    }

    /// ``transactInMemory(request:hint:phone:timeouts:events:wrapPhone:wrapDesktop:seed:linking:)`` with each
    /// side's events apart and the pretend relay's hooks, for the package's tests that look at one
    /// side's failure: both sides run to their end (neither is cancelled when the other fails) and
    /// both results come back.
    package static func transactInMemoryBothSides(
        request: [UInt8], hint: QRPayload.RequestType, phone: some HarnessAuthenticator, timeouts: SessionTimeouts,
        phoneEvents: @escaping @Sendable (SessionEvent) -> Void, desktopEvents: @escaping @Sendable (SessionEvent) -> Void,
        relay: InMemoryRelay
    ) async throws -> (desktop: Result<ClientDriver.Outcome, any Error>, phone: Result<Void, any Error>) {
        let sides = try inMemorySides(
            request: request, hint: hint, phone: phone, timeouts: timeouts, phoneEvents: phoneEvents,
            desktopEvents: desktopEvents, relay: relay)
        async let phoneResult = result(of: sides.phone)
        async let desktopResult = result(of: sides.desktop)
        return await (desktopResult, phoneResult)
    }

    private static func result<Value>(of body: @Sendable () async throws -> Value) async -> Result<Value, any Error> {
        do { return .success(try await body()) } catch { return .failure(error) }
    }

    /// Both sides of an in-memory transaction, wired to each other and ready to run.
    private static func inMemorySides(
        request: [UInt8], hint: QRPayload.RequestType, phone: some HarnessAuthenticator, timeouts: SessionTimeouts,
        phoneEvents: @escaping @Sendable (SessionEvent) -> Void, desktopEvents: @escaping @Sendable (SessionEvent) -> Void,
        relay: InMemoryRelay, seed: [UInt8]? = nil, linking: AuthenticatorSession.LinkingIdentity? = nil
    ) throws -> (phone: @Sendable () async throws -> Void, desktop: @Sendable () async throws -> ClientDriver.Outcome) {
        let transports = inMemoryTransports(relay: relay)
        let (phoneTransports, desktopTransports) = (transports.phone, transports.desktop)
        let fixedTime: UInt64? = seed == nil ? nil : reproducibleTime
        let now: @Sendable () -> UInt64 = { fixedTime ?? UInt64(Date().timeIntervalSince1970) }
        let desktopRandom = seed.map { RandomSource.deterministic(seed: $0 + Array("desktop".utf8)) } ?? .system
        let phoneRandom = seed.map { RandomSource.deterministic(seed: $0 + Array("phone".utf8)) } ?? .system
        let session = ClientSession(requestType: hint, timestamp: now(), supportsLinking: linking != nil, random: desktopRandom)
        let phoneSession = try AuthenticatorSession(
            qr: QRPayload(url: session.url), getInfo: phone.getInfo, linking: linking, random: phoneRandom)
        return (
            phone: {
                try await AuthenticatorDriver.run(
                    session: phoneSession, transports: phoneTransports, timeouts: timeouts, events: phoneEvents
                ) { request in await phone.respond(to: request, now: now()) }
            },
            desktop: {
                try await ClientDriver.run(
                    session: session, request: request, transports: desktopTransports, timeouts: timeouts,
                    events: desktopEvents)
            })
    }

    /// ``register(on:relyingParty:userName:userID:options:)`` in memory (``transactInMemory(request:hint:phone:timeouts:events:wrapPhone:wrapDesktop:seed:linking:)``):
    /// registers a new passkey for `userName` on `phone` and verifies it as `relyingParty`.
    /// `wrapPhone`/`wrapDesktop` wrap either end of the tunnel, as for `transactInMemory` (a
    /// ``RewritingTunnel`` keeps a transcript of a verified ceremony).
    public static func registerInMemory(
        on phone: some HarnessAuthenticator, relyingParty: RelyingParty, userName: String, userID: [UInt8]? = nil,
        timeouts: SessionTimeouts = .fast,
        wrapPhone: @escaping @Sendable (any TunnelTransport) -> any TunnelTransport = { $0 },
        wrapDesktop: @escaping @Sendable (any TunnelTransport) -> any TunnelTransport = { $0 }
    ) async throws -> RegisteredCredential {
        let ceremony = registration(relyingParty: relyingParty, userName: userName, userID: userID)
        let outcome = try await transactInMemory(
            request: ceremony.requestBytes, hint: .makeCredential, phone: phone, timeouts: timeouts,
            wrapPhone: wrapPhone, wrapDesktop: wrapDesktop)
        return try ceremony.verify(response: outcome.response, now: UInt64(Date().timeIntervalSince1970)).credential
    }

    /// ``signIn(on:relyingParty:knownCredentials:allowCredentials:options:)`` in memory: signs in
    /// with a passkey on `phone`, verifies the assertion against `knownCredentials` and returns the
    /// credential with its new signature counter. `wrapPhone`/`wrapDesktop` as for
    /// ``registerInMemory(on:relyingParty:userName:userID:timeouts:wrapPhone:wrapDesktop:)``.
    public static func signInInMemory(
        on phone: some HarnessAuthenticator, relyingParty: RelyingParty, knownCredentials: [RegisteredCredential],
        allowCredentials: [[UInt8]] = [], timeouts: SessionTimeouts = .fast,
        wrapPhone: @escaping @Sendable (any TunnelTransport) -> any TunnelTransport = { $0 },
        wrapDesktop: @escaping @Sendable (any TunnelTransport) -> any TunnelTransport = { $0 }
    ) async throws -> RegisteredCredential {
        let ceremony = authentication(relyingParty: relyingParty, allowCredentials: allowCredentials)
        let outcome = try await transactInMemory(
            request: ceremony.requestBytes, hint: .getAssertion, phone: phone, timeouts: timeouts,
            wrapPhone: wrapPhone, wrapDesktop: wrapDesktop)
        return try ceremony.verify(response: outcome.response, knownCredentials: knownCredentials).credential
    }
}
