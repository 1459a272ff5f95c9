import CTAP2
import HybridCore
import NIOCore
import NIOPosix
import Synchronization

/// Runs an `AuthenticatorSession` (the phone) over real or in-memory transports: creates the
/// tunnel, advertises until the handshake completes, answers one CTAP2 request with the given
/// authenticator and waits for the desktop's shutdown. Every wait is bounded; on any error the
/// advertiser is stopped and the tunnel closed before the error (a ``TransactionError``) is thrown.
///
/// The responder has ``SessionTimeouts/userAction`` to answer (the user's time to decide): past it,
/// its task is cancelled, the phone answers `CTAP2_ERR_USER_ACTION_TIMEOUT` (0x2F) as an
/// authenticator does, waits for the desktop's end as after any response, closes the tunnel
/// normally, and then throws the timeout (step "answering the request"), however the desktop
/// ended. A phone whose desktop waits as long for the answer gives itself a margin, so that the
/// 0x2F arrives before the desktop gives up. (A whole-transaction deadline that passed before the
/// request came is the transaction's timeout, with no answer.)
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

    /// A responder that commits something for its answer (saves a created passkey, a signature's
    /// counter): it calls `claim` just before committing. `true`: the answer will be sent, the
    /// user-action deadline can no longer discard it (it then leaves the responder
    /// ``SessionTimeouts/claimedGrace`` more). `false`: the deadline passed or the driver stopped waiting, so
    /// commit nothing. Without it, a phone frozen past its deadline could wake, sign and save, and
    /// lose the race to the deadline that had fired meanwhile: a counted signature never sent.
    public typealias ClaimingResponder = @Sendable (_ request: [UInt8], _ claim: @escaping @Sendable () -> Bool) async -> [UInt8]

    /// Runs one transaction to completion (the desktop's shutdown).
    public static func run(
        session: AuthenticatorSession, transports: Transports, timeouts: SessionTimeouts = .init(),
        events: @escaping @Sendable (SessionEvent) -> Void = { _ in }, respond: @escaping Responder
    ) async throws {
        try await run(
            session: session, transports: transports, timeouts: timeouts, events: events,
            respondClaiming: { request, _ in await respond(request) })
    }

    /// ``run(session:transports:timeouts:events:respond:)`` with a responder that claims its
    /// answer before it commits anything (``ClaimingResponder``).
    public static func run(
        session: AuthenticatorSession, transports: Transports, timeouts: SessionTimeouts = .init(),
        events: @escaping @Sendable (SessionEvent) -> Void = { _ in }, respondClaiming respond: @escaping ClaimingResponder
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
            let userTimedOut = try await converse(
                session: &session, tunnel: tunnel, advertisement: advertisement, timeouts: timeouts,
                transaction: transaction, events: events, respond: respond)
            await advertisement?.stop()
            await tunnel.close()
            // The user's time ran out, and the desktop has its answer: the tunnel ended as any
            // answered transaction does; the caller learns of the timeout.
            if let userTimedOut { throw userTimedOut }
        } catch {
            await advertisement?.stop()
            await tunnel.closeAfterFailure(error, side: .phone)
            throw error
        }
    }

    /// Runs the transaction on an open tunnel until the desktop ends it. Returns the user's
    /// timeout (step "answering the request") when the phone answered CTAP2_ERR_USER_ACTION_TIMEOUT
    /// for the transaction's last request: the caller closes the tunnel as after any answer, then
    /// throws it.
    static func converse<Session: AuthenticatorTransaction>(
        session: inout Session, tunnel: any TunnelTransport, advertisement: (any Advertisement)?,
        timeouts: SessionTimeouts, transaction: TransactionDeadline, events: @Sendable (SessionEvent) -> Void,
        respond: @escaping ClaimingResponder
    ) async throws -> TransactionError? {
        var phase = "waiting for the desktop's handshake"
        var timeout = timeouts.handshake
        var answered = false
        // The command of the makeCredential or getAssertion answered: the transaction's one request.
        var transactionCommand: CTAP2Command? = nil
        // The user's time ran out (the phone answered CTAP2_ERR_USER_ACTION_TIMEOUT): the outcome,
        // once the transaction ended, unless a later request is answered in time.
        var userTimedOut: TransactionError? = nil
        conversation: while true {
            let message: [UInt8]
            do {
                message = try await step(.phone, phase) {
                    try await transaction.wait(.phone, phase, timeout) { try await tunnel.receive(timeout: $0) }
                }
            } catch where userTimedOut != nil {
                // However the wait for the desktop's end ends after the timeout's answer (its
                // close, its silence, the transaction's deadline, a message that fails), the
                // user's timeout stays the outcome.
                break conversation
            } catch let error as TransactionError where answered && PeerTolerance.isOrderlyClose(error) {
                // A desktop that closes after the response instead of sending kShutdown (revision 0
                // desktops, other clients): the transaction is over, as for Chromium's phone.
                events(.closedAfterResponse(reason: (error.underlying as? RuntimeError)?.reason ?? "closed"))
                break conversation
            } catch let error as TransactionError where answered && PeerTolerance.isSilence(error) {
                // The desktop keeps the tunnel open without a word after the response: the
                // transaction is over all the same, and the phone closes the tunnel.
                events(.closedAfterResponse(reason: (error.underlying as? RuntimeError)?.reason ?? "no shutdown message"))
                break conversation
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
                    // A request answered in time after one that timed out (a preliminary command)
                    // decides the outcome.
                    userTimedOut = nil
                    // A shutdown that came with the request (in the same write) ends the transaction
                    // before anything is signed or stored.
                    try Self.checkNotEnded(&session, tunnel: tunnel)
                    let response: [UInt8]
                    // Set when the responder was at work and its deadline passed (not when the
                    // transaction's time was up before it started).
                    var userDeadlinePassed = false
                    do {
                        response = try await step(.phone, "answering the request") {
                            try await transaction.wait(.phone, "answering the request", timeouts.userAction) { limit in
                                let pending = PendingResponse(to: request, within: limit, grace: timeouts.claimedGrace, respond: respond)
                                defer { pending.cancel() }
                                // While the user decides, what the desktop sends is read as it comes:
                                // its shutdown or its leaving withdraws the question at once.
                                while await pending.wait(watching: tunnel) {
                                    try await Self.checkStillWanted(&session, tunnel: tunnel)
                                }
                                do {
                                    return try pending.response()
                                } catch let error as RuntimeError where error.code == .timeout {
                                    userDeadlinePassed = true
                                    throw error
                                }
                            }
                        }
                    } catch let error as TransactionError where userDeadlinePassed {
                        // The user did not answer in time (the responder is cancelled and writes
                        // nothing): the phone says so, as an authenticator answers a request its
                        // user let time out, so the desktop learns why instead of seeing the
                        // tunnel close; the timeout is the outcome once the transaction ended.
                        response = CTAP2Response.error(.userActionTimeout).encode()
                        userTimedOut = error
                    }
                    try Self.checkNotEnded(&session, tunnel: tunnel)
                    let ciphertext = try await step(.phone, "encrypting the response") { try session.encryptResponse(response) }
                    do {
                        try await step(.phone, "sending the response") { try await tunnel.send(ciphertext) }
                    } catch where userTimedOut != nil {
                        break conversation  // the timeout, not the tunnel that ended meanwhile
                    }
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
                    break conversation
                }
            }
            try await flush()
        }
        return userTimedOut
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
    /// Returns whether any message was there.
    @discardableResult
    static func checkNotEnded<Session: AuthenticatorTransaction>(
        _ session: inout Session, tunnel: any TunnelTransport
    ) throws -> Bool {
        var read = false
        while let early = tunnel.receiveIfReady() {
            try Self.read(early, into: &session)
            read = true
        }
        return read
    }

    /// Runs the responder with a deadline, watching nothing else: on timeout the responder's task is
    /// cancelled and the call returns at once (an uncooperative responder cannot hold the phone open).
    package static func answer(_ request: [UInt8], within limit: Duration, respond: @escaping Responder) async throws -> [UInt8] {
        let pending = PendingResponse(to: request, within: limit, grace: .zero, respond: { request, _ in await respond(request) })
        defer { pending.cancel() }
        _ = await pending.wait(watching: nil)
        return try pending.response()
    }

    /// ``checkNotEnded(_:tunnel:)`` once the tunnel said something arrived while the user decides:
    /// when no message is there, the tunnel has ended (the desktop or the relay closed it), and the
    /// request is no longer wanted either.
    static func checkStillWanted<Session: AuthenticatorTransaction>(
        _ session: inout Session, tunnel: any TunnelTransport
    ) async throws {
        guard try !checkNotEnded(&session, tunnel: tunnel) else { return }
        do {
            // Returns at once: the end (thrown), or a message that came just now.
            let message = try await tunnel.receive(timeout: .milliseconds(1))
            try Self.read(message, into: &session)
        } catch let error as RuntimeError where error.code == .timeout {
            // Nothing after all (a wrapper that dropped what arrived): the user goes on deciding.
        }
    }

    /// One message that came while the request was being answered, through the session.
    private static func read<Session: AuthenticatorTransaction>(_ early: [UInt8], into session: inout Session) throws {
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

/// The responder at work on one request, with its deadline: the driver waits for its response, the
/// deadline, or (between them) for something from the desktop. On the deadline or ``cancel()`` the
/// responder's task is cancelled and the driver moves on at once (an uncooperative responder cannot
/// hold the phone open).
private final class PendingResponse: Sendable {
    private struct State {
        var response: [UInt8]?
        /// The deadline's timeout, or the driver's cancellation.
        var expired: (any Error)?
        /// The driver, while it waits: resumed with `true` when the tunnel has something to read.
        var waiter: CheckedContinuation<Bool, Never>?
        var watcher: Task<Void, Never>?
        /// Starts the watcher: only a responder still busy after ``watchAfter`` (a person
        /// deciding) needs one, so an answer that comes at once costs no task.
        var watchTimer: DeadlineTimer?
        var work: Task<Void, Never>?
        var timer: DeadlineTimer?
        /// The responder claimed its answer (the claim a ``AuthenticatorDriver/ClaimingResponder`` makes): the deadline
        /// no longer discards it, and only ``grace`` more bounds it.
        var claimed = false

        var settled: Bool { response != nil || expired != nil }
    }
    private let state = Mutex(State())

    /// How long the responder may take before the tunnel is watched.
    static let watchAfter = Duration.milliseconds(20)

    /// How long a claimed answer may outlast the deadline.
    private let grace: Duration

    init(to request: [UInt8], within limit: Duration, grace: Duration, respond: @escaping AuthenticatorDriver.ClaimingResponder) {
        self.grace = max(.zero, grace)
        // On one of SwiftNIO's loops (the drivers run there when NIO is the executor) the deadline
        // is a timer on that loop; elsewhere, a sleeping task.
        let loop = MultiThreadedEventLoopGroup.currentEventLoop
        let timer = DeadlineTimer.arm(after: limit, on: loop) { [weak self] in
            self?.deadlinePassed(RuntimeError.timeout("waiting for the user to answer the request", after: limit), loop: loop)
        }
        let work = Task { [weak self] in
            let claim: @Sendable () -> Bool = { [weak self] in self?.claim() ?? false }
            let response = await respond(request, claim)
            self?.settle { $0.response = response }
        }
        let settled = state.withLock { state -> Bool in
            state.timer = timer
            state.work = work
            return state.settled
        }
        // A deadline that passed before the tasks were stored could not stop them.
        if settled { cancel() }
    }

    /// Waits for the response or the deadline (`false`), or for `tunnel` to have something to read
    /// (`true`; then call again to go on waiting).
    func wait(watching tunnel: (any TunnelTransport)?) async -> Bool {
        // A cancelled driver (a harness shutting down, an app embedding the phone) stops waiting
        // for its user at once.
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.settled || Task.isCancelled { return true }
                    state.waiter = continuation
                    guard let tunnel else { return false }
                    state.watchTimer = DeadlineTimer.arm(after: Self.watchAfter, on: MultiThreadedEventLoopGroup.currentEventLoop) {
                        [weak self] in self?.watch(tunnel)
                    }
                    return false
                }
                if now { continuation.resume(returning: false) }
            }
        } onCancel: {
            settle { $0.expired = CancellationError() }
        }
    }

    /// Starts watching `tunnel` if the driver still waits.
    private func watch(_ tunnel: any TunnelTransport) {
        state.withLock { state in
            guard state.waiter != nil, state.watcher == nil else { return }
            state.watcher = Task { [weak self] in
                await tunnel.awaitIncoming()
                guard !Task.isCancelled, let self else { return }
                let waiter = self.state.withLock { state in
                    state.watcher = nil
                    state.watchTimer = nil
                    return state.waiter.take()
                }
                waiter?.resume(returning: true)
            }
        }
    }

    /// The response, once ``wait(watching:)`` returned `false`; throws the deadline's timeout, or
    /// `CancellationError` when the driver was cancelled.
    func response() throws -> [UInt8] {
        try state.withLock { state in
            if let response = state.response { return response }
            throw state.expired ?? (Task.isCancelled ? CancellationError() : RuntimeError(.invalidState, "no response yet"))
        }
    }

    /// Cancels the responder, the deadline and the watcher (a finished one is not affected). Idempotent.
    func cancel() {
        let (timer, work, watcher, watchTimer) = state.withLock { ($0.timer, $0.work, $0.watcher, $0.watchTimer) }
        timer?.cancel()
        work?.cancel()
        watcher?.cancel()
        watchTimer?.cancel()
    }

    /// The responder's claim of its answer: granted unless the deadline passed or the driver
    /// stopped waiting.
    private func claim() -> Bool {
        state.withLock { state in
            guard !state.settled else { return false }
            state.claimed = true
            return true
        }
    }

    /// The deadline: it expires the wait unless the answer was claimed, which gets ``grace`` more.
    private func deadlinePassed(_ error: any Error, loop: (any EventLoop)?) {
        // Decided under the lock ``claim()`` takes: a claim granted after the check would write
        // what the expiry then discards.
        var claimed = false
        settle { state in
            claimed = state.claimed
            if !claimed { state.expired = error }
        }
        guard claimed else { return }
        let grace = DeadlineTimer.arm(after: grace, on: loop) { [weak self] in
            self?.settle { $0.expired = error }
        }
        // Settled meanwhile (the answer came): nobody cancels this timer later, so now.
        let stored = state.withLock { state -> Bool in
            guard !state.settled else { return false }
            state.timer = grace
            return true
        }
        if !stored { grace.cancel() }
    }

    /// Records the response or the deadline (the first of them), stops the rest and wakes the driver.
    /// A `change` that records neither leaves everything as it was.
    private func settle(_ change: (inout State) -> Void) {
        let (first, waiter) = state.withLock { state -> (Bool, CheckedContinuation<Bool, Never>?) in
            guard !state.settled else { return (false, nil) }
            change(&state)
            guard state.settled else { return (false, nil) }
            return (true, state.waiter.take())
        }
        guard first else { return }
        cancel()
        waiter?.resume(returning: false)
    }
}
