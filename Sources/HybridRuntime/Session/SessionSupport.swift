import CTAP2
import HybridCore

/// Progress a session driver reports while it runs, for narration (`hybrid-sim` prints these on
/// stderr) and for the `--json` event stream.
public enum SessionEvent: Sendable, Hashable {
    // MARK: Desktop (client)

    /// The desktop is listening for adverts.
    case waitingForAdvert
    /// An advert matched this session.
    case advertAccepted(rssi: Int8, domain: TunnelDomainID, ignored: Int)
    /// The desktop joined the tunnel.
    case tunnelJoined(path: String)
    /// Handshake message 1 was sent.
    case handshakeSent(bytes: Int)
    /// The Noise handshake finished and the post-handshake message arrived.
    case authenticatorReady(getInfoBytes: Int)
    /// The phone sent verified linking information.
    case linkingReceived(name: String)
    /// The CTAP2 request went out.
    case requestSent(command: UInt8, plaintextBytes: Int, ciphertextBytes: Int)
    /// The CTAP2 response arrived.
    case responseReceived(status: UInt8, plaintextBytes: Int, ciphertextBytes: Int)
    /// The shutdown message went out.
    case shutdownSent

    // MARK: Phone (authenticator)

    /// The phone created the tunnel and was given a routing ID.
    case tunnelCreated(routingID: [UInt8])
    /// The phone started advertising.
    case advertising(advertBytes: Int)
    /// The phone answered the handshake (message 2, post-handshake and update messages sent).
    case handshakeAnswered
    /// A CTAP2 request arrived.
    case requestReceived(command: UInt8, plaintextBytes: Int)
    /// The phone's response went out.
    case responseSent(status: UInt8, ciphertextBytes: Int)
    /// The desktop ended the transaction.
    case shutdownReceived
    /// After the response the desktop closed the tunnel, or said nothing within the wait, instead
    /// of sending the shutdown message (revision 0 desktops and some other clients close; a
    /// desktop may keep the tunnel open): the transaction ended successfully. `reason`: the close,
    /// or the wait that ran out.
    case closedAfterResponse(reason: String)
}

/// Every wait a driver makes has one of these limits.
public struct SessionTimeouts: Sendable, Hashable {
    /// Desktop: waiting for a nearby phone's advert.
    public var advert: Duration
    /// Opening a WebSocket connection to the tunnel service.
    public var connect: Duration
    /// Phone: waiting for the desktop's handshake message after advertising.
    public var handshake: Duration
    /// Waiting for any protocol message that needs no user action.
    public var message: Duration
    /// Waiting for an answer that may need the user (the CTAP2 response; the request on the phone).
    public var userAction: Duration
    /// The whole transaction, from the first wait to the end: every wait is cut to what is left of
    /// it, so a peer that keeps sending messages that restart the per-message waits cannot keep a
    /// transaction open for longer.
    ///
    /// Fixed when the value is made: raising another limit afterwards does not raise it. ``fast``'s
    /// is 30 s, so `timeouts.userAction = .seconds(60)` on a copy of ``fast`` still ends the
    /// transaction after 30 s; set `transaction` too, or build the value with ``init(advert:connect:handshake:message:userAction:transaction:claimedGrace:)``.
    public var transaction: Duration
    /// Phone: how long a responder that claimed its answer (``AuthenticatorDriver/ClaimingResponder``)
    /// may still take once `userAction` passed: it is saving, not waiting for a person. Past it the
    /// answer is discarded and the desktop gets `CTAP2_ERR_USER_ACTION_TIMEOUT`.
    public var claimedGrace: Duration

    /// Creates limits; the defaults suit a person at the keyboard. Without `transaction`, the whole
    /// transaction may take one wait of each kind (`advert + connect + handshake + 2 × message +
    /// userAction`, 270 s with the defaults): a transaction that respects every single limit is
    /// never cut, one that keeps restarting them is.
    public init(
        advert: Duration = .seconds(120), connect: Duration = .seconds(10), handshake: Duration = .seconds(60),
        message: Duration = .seconds(10), userAction: Duration = .seconds(60), transaction: Duration? = nil,
        claimedGrace: Duration = .seconds(5)
    ) {
        self.advert = advert
        self.connect = connect
        self.handshake = handshake
        self.message = message
        self.userAction = userAction
        self.transaction = transaction ?? (advert + connect + handshake + message * 2 + userAction)
        self.claimedGrace = claimedGrace
    }

    /// Short limits for tests: 5 s for each wait, 30 s for the whole ``transaction``.
    public static let fast = SessionTimeouts(
        advert: .seconds(5), connect: .seconds(5), handshake: .seconds(5), message: .seconds(5), userAction: .seconds(5))
}

/// A transaction failed: which step, and why. The message is one line for a person.
public struct TransactionError: Error, Sendable, CustomStringConvertible {
    /// Which side failed.
    public enum Side: String, Sendable {
        /// The client (``ClientDriver``, ``LinkedClientDriver``): the Noise initiator.
        case desktop
        /// The authenticator (``AuthenticatorDriver``, ``LinkedAuthenticatorDriver``): the Noise responder.
        case phone
    }

    /// The side that failed.
    public let side: Side
    /// What it was doing, e.g. "waiting for the handshake response".
    public let step: String
    /// The underlying error (``RuntimeError``, `HybridError`, `CTAP2Error` …).
    public let underlying: any Error

    /// Creates an error.
    public init(side: Side, step: String, underlying: any Error) {
        self.side = side
        self.step = step
        self.underlying = underlying
    }

    public var description: String { "\(side.rawValue): \(step): \(underlying)" }

    /// The runtime error code underneath, if the failure came from the network layer.
    public var runtimeCode: RuntimeError.Code? { (underlying as? RuntimeError)?.code }
    /// The protocol error code underneath, if the failure came from the protocol core.
    public var hybridCode: HybridError.Code? { (underlying as? HybridError)?.code }
    /// The WebSocket close code, if the failure was the tunnel closing (``RuntimeError/closeCode``).
    public var closeCode: WebSocketCloseCode? { (underlying as? RuntimeError)?.closeCode }
    /// The relay's HTTP status, if it refused the upgrade (``RuntimeError/httpStatus``).
    public var httpStatus: Int? { (underlying as? RuntimeError)?.httpStatus }
}

/// The end of a whole transaction (``SessionTimeouts/transaction``): each wait is cut to what is left.
struct TransactionDeadline: Sendable {
    let end: ContinuousClock.Instant
    let budget: Duration

    init(_ budget: Duration, now: ContinuousClock.Instant = .now) {
        self.budget = budget
        self.end = now + budget
    }

    /// `limit`, or what is left of the transaction if that is less.
    func cut(_ limit: Duration) -> Duration {
        max(.zero, min(limit, end - .now))
    }

    /// Throws when the transaction's time is up (before a wait that would otherwise start).
    func check(_ side: TransactionError.Side, _ stepName: String) throws {
        guard ContinuousClock.now < end else { throw expired(side, stepName) }
    }

    /// Runs a wait of at most `limit`, cut to what is left; a timeout caused by the cut is reported
    /// as the whole transaction's.
    func wait<T>(
        _ side: TransactionError.Side, _ stepName: String, _ limit: Duration, _ body: (Duration) async throws -> T
    ) async throws -> T {
        try check(side, stepName)
        let allowed = cut(limit)
        do {
            return try await body(allowed)
        } catch let error as RuntimeError where error.code == .timeout && allowed < limit {
            throw expired(side, stepName)
        }
    }

    private func expired(_ side: TransactionError.Side, _ stepName: String) -> TransactionError {
        TransactionError(side: side, step: stepName, underlying: RuntimeError.timeout("the whole transaction", after: budget))
    }
}

/// Runs `body`, wrapping any error as a ``TransactionError`` for `step`.
func step<T>(_ side: TransactionError.Side, _ name: String, _ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as TransactionError {
        throw error
    } catch {
        throw TransactionError(side: side, step: name, underlying: error)
    }
}
