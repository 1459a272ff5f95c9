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
    /// The desktop closed the tunnel after the response without sending the shutdown message
    /// (revision 0 desktops and some other clients do): the transaction ended successfully.
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

    /// Creates limits; the defaults suit a person at the keyboard.
    public init(
        advert: Duration = .seconds(120), connect: Duration = .seconds(10), handshake: Duration = .seconds(60),
        message: Duration = .seconds(10), userAction: Duration = .seconds(60)
    ) {
        self.advert = advert
        self.connect = connect
        self.handshake = handshake
        self.message = message
        self.userAction = userAction
    }

    /// Short limits for tests.
    public static let fast = SessionTimeouts(
        advert: .seconds(5), connect: .seconds(5), handshake: .seconds(5), message: .seconds(5), userAction: .seconds(5))
}

/// A transaction failed: which step, and why. The message is one line for a person.
public struct TransactionError: Error, Sendable, CustomStringConvertible {
    /// Which side failed.
    public enum Side: String, Sendable { case desktop, phone }

    /// The side that failed.
    public let side: Side
    /// What it was doing, e.g. "waiting for the handshake response".
    public let step: String
    /// The underlying error (``RuntimeError``, ``HybridError``, ``CTAP2Error`` …).
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
