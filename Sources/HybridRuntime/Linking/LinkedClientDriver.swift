import CTAP2
import HybridCore
import Logging

/// Runs a `LinkedClientSession` (the desktop of a linked, state-assisted transaction): opens
/// `/cable/contact/…` with the client payload (the relay wakes the phone), waits for the phone's
/// advert under the link's EID key, runs `Noise_NKpsk0`, sends one CTAP2 request and shuts the
/// tunnel down. Every wait is bounded by ``SessionTimeouts``; errors are ``TransactionError``s
/// (a 410 from the relay is a ``RuntimeError`` `.upgradeRejected` with `httpStatus == 410`).
public enum LinkedClientDriver {
    /// The transports a linked desktop needs.
    public struct Transports: Sendable {
        /// Opens `/cable/contact/…` on the relay with `X-caBLE-Client-Payload: headerValue`.
        public var contact: @Sendable (_ path: String, _ clientPayloadHeader: String, _ timeout: Duration) async throws -> any TunnelTransport
        /// Returns the next advert that may be this session's, as ``ClientDriver/Transports/nextAdvert``.
        public var nextAdvert: @Sendable (_ timeout: Duration) async throws -> (advert: [UInt8], rssi: Int8, ignored: Int)

        /// Creates transports from closures.
        public init(
            contact: @escaping @Sendable (String, String, Duration) async throws -> any TunnelTransport,
            nextAdvert: @escaping @Sendable (Duration) async throws -> (advert: [UInt8], rssi: Int8, ignored: Int)
        ) {
            self.contact = contact
            self.nextAdvert = nextAdvert
        }
    }

    /// The step of a ``TransactionError`` raised while the relay hands the contact request to the
    /// phone (`/cable/contact`), for callers that explain that wait.
    public static let contactStep = "contacting the linked phone"
    static let advertStep = "waiting for the linked phone's advert"

    /// Whether a failure in `step` came before the phone's advert matched: only then can a close be
    /// the phone's refusal of the contact (4410 contact ID revoked, 1008 "phone refused: …",
    /// Docs/LINKING.md), which the relay sends only to a tunnel no phone has joined. The phone joins
    /// before it advertises, and an advert that authenticates under the link proves it holds the
    /// link; after that, such a close is a relay's and says nothing of the link.
    public static func isBeforeTheAdvert(_ step: String) -> Bool {
        step == contactStep || step == advertStep
    }

    /// Runs one linked transaction: `request` is a CTAP2 request (command ‖ CBOR).
    public static func run(
        session: LinkedClientSession, request: [UInt8], transports: Transports, timeouts: SessionTimeouts = .init(),
        events: @escaping @Sendable (SessionEvent) -> Void = { _ in }
    ) async throws -> ClientDriver.Outcome {
        var session = session
        let transaction = TransactionDeadline(timeouts.transaction)
        let path = session.contactPath
        let header = session.payload.headerValue
        let tunnel = try await step(.desktop, contactStep) {
            try await transaction.wait(.desktop, contactStep, timeouts.connect) { limit in
                try await transports.contact(path, header, limit)
            }
        }
        events(.tunnelJoined(path: path))
        do {
            events(.waitingForAdvert)
            let deadline = ContinuousClock.now + transaction.cut(timeouts.advert)
            var matched = false
            while !matched {
                let (advert, rssi, ignored) = try await step(.desktop, advertStep) {
                    try await nextAdvert(transports, tunnel: tunnel, deadline: deadline)
                }
                switch session.receivedAdvert(advert) {
                case .matched(let eid, _):
                    events(.advertAccepted(rssi: rssi, domain: eid.domain, ignored: ignored))
                    matched = true
                case .ignored, .rejected:
                    // A rejected advert authenticated under this session's key but broke a plaintext rule:
                    // ignored, as Chromium ignores it, and the wait goes on. A scanner's matcher already
                    // dropped it and counted it with its reason (the statistics a timeout reports); only a
                    // transport without a scanner (the in-memory ones) hands it here, uncounted.
                    continue
                }
            }
            let outcome = try await ClientDriver.converse(
                session: &session, tunnel: tunnel, request: request, timeouts: timeouts, transaction: transaction,
                events: events)
            await tunnel.close()
            return outcome
        } catch {
            await tunnel.closeAfterFailure(error, side: .desktop)
            throw error
        }
    }
}

extension LinkedClientDriver.Transports {
    /// The desktop's real transports: `/cable/contact/…` with `X-caBLE-Client-Payload` on the relay
    /// at `relayURL`, and adverts from a running ``ProximityScanner``.
    public static func loopback(
        relayURL: String, scanner: ProximityScanner<[UInt8]>, logger: Logger = Logger(label: "hybrid-sim.desktop")
    ) -> Self {
        Self(
            contact: { path, header, timeout in
                var options = WebSocketTunnel.Options()
                options.extraHeaders = [(HybridConstants.clientPayloadHeader, header)]
                return try await WebSocketTunnel.open(url: relayURL + path, timeout: timeout, options: options, logger: logger)
            },
            nextAdvert: ClientDriver.Transports.loopback(relayURL: relayURL, scanner: scanner, logger: logger).nextAdvert)
    }
}

extension LinkedClientDriver {
    /// The next advert before `deadline`, waiting in short slices: between them the contact tunnel is
    /// checked, so a phone's refusal (the relay closes the tunnel with 1008) ends the wait at once.
    static func nextAdvert(
        _ transports: Transports, tunnel: any TunnelTransport, deadline: ContinuousClock.Instant
    ) async throws -> (advert: [UInt8], rssi: Int8, ignored: Int) {
        let slice = Duration.milliseconds(200)
        while true {
            let remaining = deadline - ContinuousClock.now
            do {
                return try await transports.nextAdvert(max(min(remaining, slice), .zero))
            } catch let error as RuntimeError where (error.code == .noNearbyAuthenticator || error.code == .timeout) && remaining > slice {
                do {
                    // Nothing may arrive before handshake message 1; only a close is expected here.
                    _ = try await tunnel.receive(timeout: .milliseconds(1))
                    throw HybridError(.unexpectedMessage, "a tunnel message before the handshake started")
                } catch let check as RuntimeError where check.code == .timeout {
                    continue
                }
            }
        }
    }
}

/// Runs a `LinkedAuthenticatorSession` (the phone answering a push): joins
/// `/cable/connect/{routing ID}/{tunnel ID}`, advertises until the handshake completes, answers one
/// request and waits for the desktop's shutdown, like ``AuthenticatorDriver``.
public enum LinkedAuthenticatorDriver {
    /// The transports a linked phone needs.
    public struct Transports: Sendable {
        /// Joins the desktop's tunnel at a `/cable/connect/…` path.
        public var join: @Sendable (_ path: String, _ timeout: Duration) async throws -> any TunnelTransport
        /// Starts broadcasting the 20-byte advert.
        public var advertise: @Sendable (_ advert: [UInt8]) async throws -> any AuthenticatorDriver.Advertisement

        /// Creates transports from closures.
        public init(
            join: @escaping @Sendable (String, Duration) async throws -> any TunnelTransport,
            advertise: @escaping @Sendable ([UInt8]) async throws -> any AuthenticatorDriver.Advertisement
        ) {
            self.join = join
            self.advertise = advertise
        }
    }

    /// Runs one linked transaction to completion (the desktop's shutdown).
    public static func run(
        session: LinkedAuthenticatorSession, transports: Transports, timeouts: SessionTimeouts = .init(),
        events: @escaping @Sendable (SessionEvent) -> Void = { _ in }, respond: @escaping AuthenticatorDriver.Responder
    ) async throws {
        try await run(
            session: session, transports: transports, timeouts: timeouts, events: events,
            respondClaiming: { request, _ in await respond(request) })
    }

    /// ``run(session:transports:timeouts:events:respond:)`` with a responder that claims its
    /// answer before it commits anything (``AuthenticatorDriver/ClaimingResponder``).
    public static func run(
        session: LinkedAuthenticatorSession, transports: Transports, timeouts: SessionTimeouts = .init(),
        events: @escaping @Sendable (SessionEvent) -> Void = { _ in },
        respondClaiming respond: @escaping AuthenticatorDriver.ClaimingResponder
    ) async throws {
        var session = session
        let transaction = TransactionDeadline(timeouts.transaction)
        let connectPath = session.connectPath
        let tunnel = try await step(.phone, "joining the desktop's tunnel") {
            try await transaction.wait(.phone, "joining the desktop's tunnel", timeouts.connect) { limit in
                try await transports.join(connectPath, limit)
            }
        }
        events(.tunnelCreated(routingID: session.routingID))
        var advertisement: (any AuthenticatorDriver.Advertisement)? = nil
        do {
            let advert = session.advert()
            advertisement = try await step(.phone, "starting to advertise") { try await transports.advertise(advert) }
            events(.advertising(advertBytes: advert.count))
            let userTimedOut = try await AuthenticatorDriver.converse(
                session: &session, tunnel: tunnel, advertisement: advertisement, timeouts: timeouts,
                transaction: transaction, events: events, respond: respond)
            await advertisement?.stop()
            await tunnel.close()
            if let userTimedOut { throw userTimedOut }
        } catch {
            await advertisement?.stop()
            await tunnel.closeAfterFailure(error, side: .phone)
            throw error
        }
    }
}
