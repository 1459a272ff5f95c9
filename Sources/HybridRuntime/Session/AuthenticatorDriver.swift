import CTAP2
import HybridCore
import NIOCore
import NIOPosix
import Synchronization

/// Runs an `AuthenticatorSession` (the phone) over real or in-memory transports: creates the
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
        events: @escaping @Sendable (SessionEvent) -> Void = { _ in }, respond: @escaping Responder
    ) async throws {
        var session = session
        let transaction = TransactionDeadline(timeouts.transaction)
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
                session: &session, tunnel: tunnel, advertisement: advertisement, timeouts: timeouts,
                transaction: transaction, events: events, respond: respond)
            await advertisement?.stop()
            await tunnel.close()
        } catch {
            await advertisement?.stop()
            await tunnel.closeAfterFailure(error, side: .phone)
            throw error
        }
    }

    static func converse<Session: AuthenticatorTransaction>(
        session: inout Session, tunnel: any TunnelTransport, advertisement: (any Advertisement)?,
        timeouts: SessionTimeouts, transaction: TransactionDeadline, events: @Sendable (SessionEvent) -> Void,
        respond: @escaping Responder
    ) async throws {
        var phase = "waiting for the desktop's handshake"
        var timeout = timeouts.handshake
        var answered = false
        // The command of the makeCredential or getAssertion answered: the transaction's one request.
        var transactionCommand: CTAP2Command? = nil
        while true {
            let message: [UInt8]
            do {
                message = try await step(.phone, phase) {
                    try await transaction.wait(.phone, phase, timeout) { try await tunnel.receive(timeout: $0) }
                }
            } catch let error as TransactionError where answered && PeerTolerance.isOrderlyClose(error) {
                // A desktop that closes after the response instead of sending kShutdown (revision 0
                // desktops, other clients): the transaction is over, as for Chromium's phone.
                events(.closedAfterResponse(reason: (error.underlying as? RuntimeError)?.reason ?? "closed"))
                return
            } catch let error as TransactionError where answered && PeerTolerance.isSilence(error) {
                // The desktop keeps the tunnel open without a word after the response: the
                // transaction is over all the same, and the phone closes the tunnel.
                events(.closedAfterResponse(reason: (error.underlying as? RuntimeError)?.reason ?? "no shutdown message"))
                return
            }
            let actions = try await step(.phone, phase) { try session.receivedMessage(message) }
            // Consecutive messages (handshake message 2, the post-handshake and the update
            // message) go out in one write, flushed before anything that waits or ends the
            // transaction; the advert stops once the handshake answer is out.
            var outgoing: [[UInt8]] = []
            var handshakeAnswered = false
            func flush() async throws {
                if !outgoing.isEmpty {
                    try await step(.phone, "sending to the desktop") { try await tunnel.send(contentsOf: outgoing) }
                    outgoing = []
                }
                if handshakeAnswered {
                    handshakeAnswered = false
                    await advertisement?.stop()
                    events(.handshakeAnswered)
                }
            }
            for action in actions {
                switch action {
                case .send(let bytes):
                    outgoing.append(bytes)
                case .handshakeComplete:
                    handshakeAnswered = true
                    phase = "waiting for the desktop's request"
                    timeout = timeouts.message
                case .request(let request):
                    try await flush()
                    if let transactionCommand {
                        throw TransactionError(
                            side: .phone, step: phase,
                            underlying: HybridError(.unexpectedMessage, Self.secondRequest(request, after: transactionCommand)))
                    }
                    events(.requestReceived(command: request.first ?? 0, plaintextBytes: request.count))
                    let response = try await step(.phone, "answering the request") {
                        try await transaction.wait(.phone, "answering the request", timeouts.userAction) { limit in
                            try await answer(request, within: limit, respond: respond)
                        }
                    }
                    try Self.checkNotEnded(&session, tunnel: tunnel)
                    let ciphertext = try await step(.phone, "encrypting the response") { try session.encryptResponse(response) }
                    try await step(.phone, "sending the response") { try await tunnel.send(ciphertext) }
                    events(.responseSent(status: response.first ?? 0xFF, ciphertextBytes: ciphertext.count))
                    answered = true
                    let command = CTAP2Command(rawValue: request.first ?? 0)
                    if Self.transactionCommands.contains(command) { transactionCommand = command }
                    phase = "waiting for the desktop to end the transaction"
                case .shutdown:
                    try await flush()
                    events(.shutdownReceived)
                    guard answered else {
                        throw TransactionError(
                            side: .phone, step: phase,
                            underlying: HybridError(.unexpectedMessage, "the desktop ended the transaction without a request"))
                    }
                    return
                }
            }
            try await flush()
        }
    }

    /// The requests that are a transaction's purpose: after one of them is answered, the phone
    /// answers no other request.
    static let transactionCommands: Set<CTAP2Command> = [.makeCredential, .getAssertion]

    /// Why a request after the transaction's makeCredential or getAssertion was answered is refused:
    /// a phone answers one per transaction and then only waits for the end (Chromium's phone ends
    /// the transaction with that response; webauthn-rs: "phones answer one command and hang up").
    /// (The sessions refuse a request without a command byte before the driver sees it.)
    static func secondRequest(_ request: [UInt8], after command: CTAP2Command) -> String {
        "the desktop sent another request (\(CTAP2Command(rawValue: request.first ?? 0))) after the response to its \(command): "
            + "a phone answers one makeCredential or getAssertion per transaction; send each in a transaction of its own"
    }

    /// Reads what the desktop sent while the request was being answered. A shutdown means the
    /// desktop ended the transaction (Chrome's desktop sends it when the user cancels): the response
    /// is not sent, as Chromium's phone sends none (`v2_authenticator.cc`: the tunnel's end before
    /// the transaction is done is `EOF_WHILE_PROCESSING`). Anything else keeps its usual meaning (an
    /// update message is ignored; a second request is refused by the session).
    static func checkNotEnded<Session: AuthenticatorTransaction>(
        _ session: inout Session, tunnel: any TunnelTransport
    ) throws {
        while let early = tunnel.receiveIfReady() {
            let actions: [AuthenticatorSession.Action]
            do {
                actions = try session.receivedMessage(early)
            } catch {
                throw TransactionError(side: .phone, step: "answering the request", underlying: error)
            }
            if actions.contains(where: { if case .shutdown = $0 { true } else { false } }) {
                throw TransactionError(
                    side: .phone, step: "answering the request",
                    underlying: HybridError(
                        .unexpectedMessage, "the desktop ended the transaction while the request was being answered; the response was not sent"))
            }
        }
    }

    /// Runs the responder with a deadline. On timeout the responder's task is cancelled and the
    /// driver moves on at once (an uncooperative responder cannot hold the phone open).
    package static func answer(_ request: [UInt8], within limit: Duration, respond: @escaping Responder) async throws -> [UInt8] {
        let race = ResponderRace()
        return try await withCheckedThrowingContinuation { continuation in
            race.arm(continuation)
            let expired: @Sendable () -> Void = {
                race.finish(.failure(RuntimeError.timeout("waiting for the user to answer the request", after: limit)))
            }
            // On one of SwiftNIO's loops (the drivers run there when NIO is the executor) the
            // deadline is a timer on that loop; elsewhere, a sleeping task.
            let deadline = DeadlineTimer.arm(after: limit, on: MultiThreadedEventLoopGroup.currentEventLoop, expired)
            race.track(timer: deadline, work: Task {
                let response = await respond(request)
                race.finish(.success(response))
            })
        }
    }
}

/// Resumes a continuation exactly once, with whichever of the responder and its timer finishes first.
private final class ResponderRace: Sendable {
    private struct State {
        var continuation: CheckedContinuation<[UInt8], any Error>?
        var timer: DeadlineTimer?
        var work: Task<Void, Never>?
        var finished = false
    }
    private let state = Mutex(State())

    func arm(_ continuation: CheckedContinuation<[UInt8], any Error>) {
        state.withLock { $0.continuation = continuation }
    }

    /// Remembers the timer and the responder's task so the loser is cancelled (at once, if the race
    /// is already over).
    func track(timer: DeadlineTimer, work: Task<Void, Never>) {
        let over = state.withLock { state -> Bool in
            state.timer = timer
            state.work = work
            return state.finished
        }
        if over { cancelAll() }
    }

    /// Resumes the continuation with `result` unless the other side already did, then cancels both tasks.
    func finish(_ result: Result<[UInt8], any Error>) {
        let continuation = state.withLock { state -> CheckedContinuation<[UInt8], any Error>? in
            state.finished = true
            return state.continuation.take()
        }
        continuation?.resume(with: result)
        cancelAll()
    }

    private func cancelAll() {
        let (timer, work) = state.withLock { ($0.timer, $0.work) }
        timer?.cancel()
        work?.cancel()
    }
}
