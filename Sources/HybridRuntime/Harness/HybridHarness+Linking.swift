import CTAP2
import Foundation
import HybridCore

/// Linked (state-assisted) transactions: register by QR with linking, then sign in through the link
/// with no QR code, over loopback (the harness's relay, its push channel, UDP adverts) or in memory.
///
/// ```swift
/// let phone = LinkedPhone()
/// let (credential, link) = try await harness.registerAndLink(on: phone, relyingParty: rp, userName: "alice")
/// let signedIn = try await harness.signInLinked(on: phone, link: link, relyingParty: rp, knownCredentials: [credential])
/// ```
extension HybridHarness {
    /// Registers a passkey by QR with linking; returns the verified credential and the verified link.
    public func registerAndLink(
        on phone: LinkedPhone, relyingParty: RelyingParty, userName: String, options: TransactionOptions = .init()
    ) async throws -> (credential: RegisteredCredential, link: LinkingInfo) {
        let ceremony = Self.registration(relyingParty: relyingParty, userName: userName, userID: nil)
        let outcome = try await transact(
            request: ceremony.requestBytes, hint: .makeCredential, phone: phone.phone, options: options,
            linking: phone.linkingIdentityForQR())
        return try Self.linkedRegistration(ceremony, outcome)
    }

    /// ``registerAndLink(on:relyingParty:userName:options:)`` with no socket
    /// (``transactInMemory(request:hint:phone:timeouts:events:wrapPhone:wrapDesktop:seed:linking:)``
    /// with the phone's linking identity): a QR registration that links, verified as
    /// `relyingParty`. The link it returns works with ``transactLinkedInMemory(request:hint:phone:link:timeouts:)``
    /// and ``signInLinkedInMemory(on:link:relyingParty:knownCredentials:timeouts:)``, and over
    /// loopback with a started harness.
    public static func registerAndLinkInMemory(
        on phone: LinkedPhone, relyingParty: RelyingParty, userName: String, timeouts: SessionTimeouts = .fast
    ) async throws -> (credential: RegisteredCredential, link: LinkingInfo) {
        let ceremony = registration(relyingParty: relyingParty, userName: userName, userID: nil)
        let outcome = try await transactInMemory(
            request: ceremony.requestBytes, hint: .makeCredential, phone: phone.phone, timeouts: timeouts,
            linking: phone.linkingIdentityForQR())
        return try linkedRegistration(ceremony, outcome)
    }

    /// ``signInLinked(on:link:relyingParty:knownCredentials:options:)`` with no socket
    /// (``transactLinkedInMemory(request:hint:phone:link:timeouts:)``): signs in through `link`,
    /// verifies the assertion and returns the credential with its new signature counter.
    public static func signInLinkedInMemory(
        on phone: LinkedPhone, link: LinkingInfo, relyingParty: RelyingParty, knownCredentials: [RegisteredCredential],
        timeouts: SessionTimeouts = .fast
    ) async throws -> RegisteredCredential {
        let ceremony = authentication(relyingParty: relyingParty, allowCredentials: [])
        let outcome = try await transactLinkedInMemory(
            request: ceremony.requestBytes, hint: .getAssertion, phone: phone, link: link, timeouts: timeouts)
        return try ceremony.verify(response: outcome.response, knownCredentials: knownCredentials).credential
    }

    /// A registration's verified credential and the link the phone sent with it.
    private static func linkedRegistration(
        _ ceremony: Ceremony.Registration, _ outcome: ClientDriver.Outcome
    ) throws -> (credential: RegisteredCredential, link: LinkingInfo) {
        let credential = try ceremony.verify(response: outcome.response, now: UInt64(Date().timeIntervalSince1970)).credential
        guard let link = outcome.linking else {
            throw RuntimeError(.protocolViolation, "the phone sent no linking information")
        }
        return (credential, link)
    }

    /// Signs in through `link` (no QR code) and verifies the assertion; returns the credential with
    /// its new signature counter.
    public func signInLinked(
        on phone: LinkedPhone, link: LinkingInfo, relyingParty: RelyingParty, knownCredentials: [RegisteredCredential],
        options: TransactionOptions = .init()
    ) async throws -> RegisteredCredential {
        let ceremony = Ceremony.Authentication(relyingParty: relyingParty, challenge: RandomSource.system.bytes(32))
        let outcome = try await transactLinked(
            request: ceremony.requestBytes, hint: .getAssertion, phone: phone, link: link, options: options)
        return try ceremony.verify(response: outcome.response, knownCredentials: knownCredentials).credential
    }

    /// One linked transaction over loopback: the phone listens on the relay's push channel (answering
    /// one contact request), the desktop contacts it and runs `request`.
    public func transactLinked(
        request: [UInt8], hint: QRPayload.RequestType, phone: LinkedPhone, link: LinkingInfo,
        options: TransactionOptions = .init()
    ) async throws -> ClientDriver.Outcome {
        var desktopSession = try LinkedClientSession(link: .init(link), requestType: hint)
        desktopSession.keyLog = Self.keyLogHook(options.keyLog, side: "desktop")
        let session = desktopSession
        let logger = self.logger
        let scanner = ProximityScanner<[UInt8]>(
            minRSSI: options.minRSSI, logger: logger, matcher: ClientDriver.Transports.advertMatcher(eidKey: session.eidKey))
        let proximity = try await scanner.start()
        let relayURL = self.relayURL
        let transports = LinkedClientDriver.Transports.loopback(relayURL: relayURL, scanner: scanner, logger: logger)
        return try await Self.stopping(scanner) { try await Self.runBoth(
            executor: taskExecutor,
            phone: {
                try await phone.listen(
                    relayURL: relayURL, proximity: proximity, count: 1, limit: options.timeouts.advert + options.timeouts.userAction,
                    rssi: options.rssi, timeouts: options.timeouts, logger: logger, events: options.events)
            },
            desktop: {
                try await LinkedClientDriver.run(
                    session: session, request: request, transports: transports, timeouts: options.timeouts,
                    events: options.events)
            }) }
    }

    /// One linked transaction with no sockets: the relay's push is simulated, the tunnel is an
    /// ``InMemoryTunnel`` pair and the advert travels through memory. The same drivers and state
    /// machines as over loopback.
    public static func transactLinkedInMemory(
        request: [UInt8], hint: QRPayload.RequestType, phone: LinkedPhone, link: LinkingInfo,
        timeouts: SessionTimeouts = .fast
    ) async throws -> ClientDriver.Outcome {
        let session = try LinkedClientSession(link: .init(link), requestType: hint)
        let push = PushMessage(
            tunnelID: RandomSource.system.bytes(16), routingID: RandomSource.system.bytes(3), clientPayload: session.payload.cbor)
        let phoneSession = try phone.session(for: push)
        return try await runLinkedInMemory(
            desktop: session, phone: phoneSession, request: request, timeouts: timeouts
        ) { request in phone.phone.respond(to: request, now: UInt64(Date().timeIntervalSince1970)) }
    }

    /// Runs a linked desktop session against a linked phone session over an in-memory tunnel.
    ///
    /// - Parameters:
    ///   - desktop: the desktop's session (a `LinkedClientSession`).
    ///   - phone: the phone's session (a `LinkedAuthenticatorSession`, e.g. from ``LinkedPhone/session(for:eidPlaintext:)``).
    ///   - request: the CTAP2 request the desktop sends (command ‖ CBOR).
    ///   - timeouts: both sides' limits.
    ///   - wrapDesktop: wraps the desktop's end of the tunnel (a recorder, a fault injector).
    ///   - wrapPhone: wraps the phone's end of the tunnel.
    ///   - advertTap: called with each advert the phone sends, before the desktop gets it.
    ///   - respond: the phone's authenticator: request bytes in, status ‖ CBOR out.
    /// - Returns: the desktop's outcome once both sides finished.
    public static func runLinkedInMemory(
        desktop: LinkedClientSession, phone: LinkedAuthenticatorSession, request: [UInt8], timeouts: SessionTimeouts = .fast,
        wrapDesktop: @escaping @Sendable (any TunnelTransport) -> any TunnelTransport = { $0 },
        wrapPhone: @escaping @Sendable (any TunnelTransport) -> any TunnelTransport = { $0 },
        adverts advertTap: @escaping @Sendable ([UInt8]) -> Void = { _ in },
        respond: @escaping AuthenticatorDriver.Responder
    ) async throws -> ClientDriver.Outcome {
        let (phoneEnd, desktopEnd) = InMemoryTunnel.pair()
        let advertBox = AdvertMailbox()
        let desktopTransports = LinkedClientDriver.Transports(
            contact: { _, _, _ in wrapDesktop(desktopEnd) },
            nextAdvert: { timeout in (try await advertBox.next(timeout: timeout), ProximityDefaults.rssi, 0) })
        let phoneTransports = LinkedAuthenticatorDriver.Transports(
            join: { _, _ in wrapPhone(phoneEnd) },
            advertise: { advert in
                advertTap(advert)
                advertBox.post(advert)
                return NoAdvertisement()
            })
        return try await runBoth(
            phone: {
                try await LinkedAuthenticatorDriver.run(session: phone, transports: phoneTransports, timeouts: timeouts, respond: respond)
            },
            desktop: {
                try await LinkedClientDriver.run(session: desktop, request: request, transports: desktopTransports, timeouts: timeouts)
            })
    }

    /// Runs a phone and a desktop side concurrently; returns the desktop's outcome once both
    /// finished, or throws the first error (cancelling the other side) — except that a side that
    /// failed only because the other closed the tunnel after a failure (1011) gives way to that
    /// other side's own error, the cause. `executor`: the task executor both sides prefer (`nil`: none).
    static func runBoth(
        executor: (any TaskExecutor)? = nil,
        phone: @escaping @Sendable () async throws -> Void,
        desktop: @escaping @Sendable () async throws -> ClientDriver.Outcome
    ) async throws -> ClientDriver.Outcome {
        try await withTaskExecutorPreference(executor) {
            try await bothSides(phone: phone, desktop: desktop)
        }
    }

    private static func bothSides(
        phone: @escaping @Sendable () async throws -> Void,
        desktop: @escaping @Sendable () async throws -> ClientDriver.Outcome
    ) async throws -> ClientDriver.Outcome {
        try await withThrowingTaskGroup(of: ClientDriver.Outcome?.self) { group in
            group.addTask {
                try await phone()
                return nil
            }
            group.addTask { try await desktop() }
            var outcome: ClientDriver.Outcome? = nil
            do {
                for try await result in group {
                    if let result { outcome = result }
                }
            } catch {
                // The failing side closes the tunnel (1011) before it throws, so its peer may
                // report the close first: wait for the failing side's error and throw that.
                if (error as? TransactionError)?.endedByPeerFailure == true {
                    do {
                        while try await group.next() != nil {}
                    } catch let cause {
                        group.cancelAll()
                        throw cause
                    }
                }
                group.cancelAll()
                throw error
            }
            guard let outcome else { preconditionFailure("the desktop task always returns an outcome") }
            return outcome
        }
    }
}

/// Hands the in-memory advert from the phone to the desktop.
final class AdvertMailbox: Sendable {
    private let inbox = MessageInbox<[UInt8]>()

    func post(_ advert: [UInt8]) { inbox.push(advert) }

    func next(timeout: Duration) async throws -> [UInt8] {
        do {
            return try await inbox.next(timeout: timeout, operation: "waiting for an in-memory advert")
        } catch {
            throw RuntimeError(.noNearbyAuthenticator, "no in-memory advert within \(timeout)")
        }
    }
}

/// An in-memory advert needs no stopping.
struct NoAdvertisement: AuthenticatorDriver.Advertisement {
    func stop() async {}
}
