import CTAP2
import HybridCore

/// Runs an ``AuthenticatorSession`` (the phone) over real or in-memory transports: creates the
/// tunnel, advertises until the handshake completes, answers one CTAP2 request with the given
/// authenticator and waits for the desktop's shutdown. Every wait is bounded; on any error the
/// advertiser is stopped and the tunnel closed before the error (a ``TransactionError``) is thrown.
public enum AuthenticatorDriver {
    /// A running advertiser the driver can stop.
    public protocol Advertisement: Sendable {
        /// Stops advertising. Idempotent.
        func stop() async
    }

    /// The transports a phone needs, as closures so tests can substitute in-memory ones.
    public struct Transports: Sendable {
        /// Opens `/cable/new/…` on the relay; returns the tunnel and the routing ID the relay assigned.
        public var createTunnel: @Sendable (_ path: String, _ timeout: Duration) async throws -> (tunnel: any TunnelTransport, routingID: [UInt8])
        /// Starts broadcasting the 20-byte advert.
        public var advertise: @Sendable (_ advert: [UInt8]) async throws -> any Advertisement

        /// Creates transports from closures.
        public init(
            createTunnel: @escaping @Sendable (String, Duration) async throws -> (tunnel: any TunnelTransport, routingID: [UInt8]),
            advertise: @escaping @Sendable ([UInt8]) async throws -> any Advertisement
        ) {
            self.createTunnel = createTunnel
            self.advertise = advertise
        }
    }

    /// Answers one request: CTAP2 request bytes in, response bytes (status ‖ CBOR) out.
    public typealias Responder = @Sendable (_ request: [UInt8]) async -> [UInt8]

    /// Runs one transaction to completion (the desktop's shutdown).
    public static func run(
        session: AuthenticatorSession, transports: Transports, timeouts: SessionTimeouts = .init(),
        events: @escaping @Sendable (SessionEvent) -> Void = { _ in }, respond: Responder
    ) async throws {
        var session = session
        let path = session.newTunnelPath
        let (tunnel, routingID) = try await step(.phone, "creating the tunnel") {
            try await transports.createTunnel(path, timeouts.connect)
        }
        events(.tunnelCreated(routingID: routingID))
        var advertisement: (any Advertisement)? = nil
        do {
            let advert = try await step(.phone, "building the advert") { try session.tunnelCreated(routingID: routingID) }
            advertisement = try await step(.phone, "starting to advertise") { try await transports.advertise(advert) }
            events(.advertising(advertBytes: advert.count))
            try await converse(
                session: &session, tunnel: tunnel, advertisement: advertisement, timeouts: timeouts, events: events, respond: respond)
            await advertisement?.stop()
            await tunnel.close()
        } catch {
            await advertisement?.stop()
            await tunnel.close()
            throw error
        }
    }

    private static func converse(
        session: inout AuthenticatorSession, tunnel: any TunnelTransport, advertisement: (any Advertisement)?,
        timeouts: SessionTimeouts, events: @Sendable (SessionEvent) -> Void, respond: Responder
    ) async throws {
        var phase = "waiting for the desktop's handshake"
        var timeout = timeouts.handshake
        var answered = false
        while true {
            let message = try await step(.phone, phase) { try await tunnel.receive(timeout: timeout) }
            let actions = try await step(.phone, phase) { try session.receivedMessage(message) }
            for action in actions {
                switch action {
                case .send(let bytes):
                    try await step(.phone, "sending to the desktop") { try await tunnel.send(bytes) }
                case .handshakeComplete:
                    await advertisement?.stop()
                    events(.handshakeAnswered)
                    phase = "waiting for the desktop's request"
                    timeout = timeouts.message
                case .request(let request):
                    events(.requestReceived(command: request.first ?? 0, plaintextBytes: request.count))
                    let response = await respond(request)
                    let ciphertext = try await step(.phone, "encrypting the response") { try session.encryptResponse(response) }
                    try await step(.phone, "sending the response") { try await tunnel.send(ciphertext) }
                    events(.responseSent(status: response.first ?? 0xFF, ciphertextBytes: ciphertext.count))
                    answered = true
                    phase = "waiting for the desktop to end the transaction"
                case .shutdown:
                    events(.shutdownReceived)
                    guard answered else {
                        throw TransactionError(
                            side: .phone, step: phase,
                            underlying: HybridError(.unexpectedMessage, "the desktop ended the transaction without a request"))
                    }
                    return
                }
            }
        }
    }
}
