import CTAP2
import HybridCore

/// Runs a `ClientSession` (the desktop) over real or in-memory transports: waits for the phone's
/// advert, joins the tunnel, runs the handshake, sends one CTAP2 request, returns the response and
/// shuts the tunnel down. Every wait is bounded by ``SessionTimeouts``; on any error the tunnel is
/// closed before the error (a ``TransactionError``) is thrown.
public enum ClientDriver {
    /// What a finished desktop transaction produced.
    public struct Outcome: Sendable {
        /// The phone's getInfo response (from the post-handshake message).
        public var getInfo: [UInt8]
        /// The CTAP2 response: status byte ‖ CBOR.
        public var response: [UInt8]
        /// Verified linking information, if the phone sent some.
        public var linking: LinkingInfo?
    }

    /// The transports a desktop needs, as closures so tests can substitute in-memory ones.
    public struct Transports: Sendable {
        /// Returns the next advert that may be this session's (20 bytes), its RSSI, and `ignored`: how
        /// many datagrams were passed over before it (reported in ``SessionEvent/advertAccepted(rssi:domain:ignored:)``;
        /// 0 when the transport does not count); throws on timeout.
        public var nextAdvert: @Sendable (_ timeout: Duration) async throws -> (advert: [UInt8], rssi: Int8, ignored: Int)
        /// Opens the tunnel at a `/cable/connect/…` path on the relay for the advertised domain.
        public var connect: @Sendable (_ path: String, _ domain: TunnelDomainID, _ timeout: Duration) async throws -> any TunnelTransport

        /// Creates transports from closures.
        public init(
            nextAdvert: @escaping @Sendable (Duration) async throws -> (advert: [UInt8], rssi: Int8, ignored: Int),
            connect: @escaping @Sendable (String, TunnelDomainID, Duration) async throws -> any TunnelTransport
        ) {
            self.nextAdvert = nextAdvert
            self.connect = connect
        }
    }

    /// Runs one transaction: `request` is a CTAP2 request (command ‖ CBOR).
    ///
    /// `outcomeReady` is called with the outcome as soon as the response is in and the shutdown
    /// message went out, before the tunnel's closing handshake: the relying party can verify the
    /// response while the tunnel closes, as a browser resolves the WebAuthn request when the
    /// response arrives. `run` returns the same outcome once the tunnel is closed.
    public static func run(
        session: ClientSession, request: [UInt8], transports: Transports, timeouts: SessionTimeouts = .init(),
        events: @escaping @Sendable (SessionEvent) -> Void = { _ in },
        outcomeReady: @Sendable (Outcome) async -> Void = { _ in }
    ) async throws -> Outcome {
        var session = session
        let transaction = TransactionDeadline(timeouts.transaction)
        events(.waitingForAdvert)
        let deadline = ContinuousClock.now + transaction.cut(timeouts.advert)
        var matched: (eid: EID, path: String)? = nil
        while matched == nil {
            let remaining = deadline - ContinuousClock.now
            let (advert, rssi, ignored) = try await step(.desktop, "waiting for a nearby phone") {
                try await transports.nextAdvert(max(remaining, .zero))
            }
            switch session.receivedAdvert(advert) {
            case .matched(let eid, let path):
                events(.advertAccepted(rssi: rssi, domain: eid.domain, ignored: ignored))
                matched = (eid, path)
            case .ignored, .rejected:
                // A rejected advert authenticated under this session's key but broke a plaintext rule:
                // ignored, as Chromium ignores it, and the wait goes on. A scanner's matcher already
                // dropped it and counted it with its reason (the statistics a timeout reports); only a
                // transport without a scanner (the in-memory ones) hands it here, uncounted.
                continue
            }
        }
        guard let (eid, path) = matched else { preconditionFailure("loop exits only with a match") }

        let tunnel = try await step(.desktop, "joining the tunnel") {
            try await transaction.wait(.desktop, "joining the tunnel", timeouts.connect) { limit in
                try await transports.connect(path, eid.domain, limit)
            }
        }
        events(.tunnelJoined(path: path))
        do {
            let outcome = try await converse(
                session: &session, tunnel: tunnel, request: request, timeouts: timeouts, transaction: transaction,
                events: events)
            await outcomeReady(outcome)
            await tunnel.close()
            return outcome
        } catch {
            await tunnel.closeAfterFailure(error, side: .desktop)
            throw error
        }
    }

    static func converse<Session: ClientTransaction>(
        session: inout Session, tunnel: any TunnelTransport, request: [UInt8], timeouts: SessionTimeouts,
        transaction: TransactionDeadline, events: @Sendable (SessionEvent) -> Void
    ) async throws -> Outcome {
        let message1 = session.startHandshake()
        try await step(.desktop, "sending the handshake") { try await tunnel.send(message1) }
        events(.handshakeSent(bytes: message1.count))

        var getInfo: [UInt8]? = nil
        var linking: LinkingInfo? = nil
        var phase = "waiting for the handshake response"
        while getInfo == nil {
            let message = try await step(.desktop, phase) {
                try await transaction.wait(.desktop, phase, timeouts.message) { try await tunnel.receive(timeout: $0) }
            }
            let actions = try await step(.desktop, phase) { try session.receivedMessage(message) }
            phase = "waiting for the post-handshake message"
            for action in actions {
                switch action {
                case .ready(let info): getInfo = info
                case .linked(let info):
                    linking = info
                    events(.linkingReceived(name: info.name))
                case .response: throw TransactionError(side: .desktop, step: phase, underlying: HybridError(.unexpectedMessage, "response before request"))
                }
            }
        }
        events(.authenticatorReady(getInfoBytes: getInfo?.count ?? 0))

        let ciphertext = try await step(.desktop, "encrypting the request") { try session.encryptRequest(request) }
        try await step(.desktop, "sending the request") { try await tunnel.send(ciphertext) }
        events(.requestSent(command: request.first ?? 0, plaintextBytes: request.count, ciphertextBytes: ciphertext.count))

        var response: [UInt8]? = nil
        while response == nil {
            let message = try await step(.desktop, "waiting for the phone's response") {
                try await transaction.wait(.desktop, "waiting for the phone's response", timeouts.userAction) {
                    try await tunnel.receive(timeout: $0)
                }
            }
            let actions = try await step(.desktop, "reading the phone's response") { try session.receivedMessage(message) }
            for action in actions {
                switch action {
                case .response(let bytes):
                    response = bytes
                    events(.responseReceived(status: bytes.first ?? 0xFF, plaintextBytes: bytes.count, ciphertextBytes: message.count))
                case .linked(let info):
                    linking = info
                    events(.linkingReceived(name: info.name))
                case .ready: break
                }
            }
        }
        // The response is verified and final: failing to say goodbye (the phone or the relay already
        // closed) must not throw it away, or the relying party would not store a registration the
        // phone kept. The shutdown is best effort (no `shutdownSent` event when it failed).
        let outcome = Outcome(getInfo: getInfo ?? [], response: response ?? [], linking: linking)
        do {
            let shutdown = try session.encryptShutdown()
            try await tunnel.send(shutdown)
            events(.shutdownSent)
        } catch {
            // Nothing to undo: the tunnel is closed by the caller either way.
        }
        return outcome
    }
}
