import CTAP2
import Crypto
import Foundation
import HybridCore
import HybridRuntime
import Logging
import Synchronization
import Testing

/// A logger that drops everything: these tests assert on errors and counters, not on log lines,
/// and 200 concurrent sign-ins would otherwise print a few thousand lines.
let quietLogger = Logger(label: "hybrid-sim.test", factory: { _ in SwiftLogNoOpLogHandler() })

extension SessionTimeouts {
    /// Every limit added up: the longest a transaction may legitimately take.
    ///
    /// Fault tests show *how* a transaction ended by its error (`.closed` or a protocol error means
    /// a check or a close ended it; `.timeout` or `noNearbyAuthenticator` means a timer did) and use
    /// the clock only to show it ended within its budget. Tighter wall-clock bounds would fail
    /// spuriously when `swift test` runs CPU-heavy synchronous tests of other targets beside these,
    /// which can keep both threads of a 2-core machine's concurrency pool busy for seconds.
    var total: Duration { advert + connect + handshake + message + userAction }
}

/// The relying party every test signs in to.
let exampleRP = RelyingParty(id: "example.com", origin: "https://example.com")

/// The current time as the core wants it (seconds since the Unix epoch).
func unixNow() -> UInt64 { UInt64(Date().timeIntervalSince1970) }

/// What each side of one transaction ended with. Unlike ``HybridHarness/transact``, which throws
/// the first error and cancels the other side, the rig lets both sides run to their own end so a
/// test can check that *each* finishes, and how.
struct RigOutcome: Sendable {
    /// The desktop's outcome or error.
    var desktop: Result<ClientDriver.Outcome, any Error>
    /// The phone's error, if it failed.
    var phone: Result<Void, any Error>
    /// From start until both sides had returned.
    var elapsed: Duration

    /// The desktop's error as a ``TransactionError``, recording an issue if it is anything else.
    func desktopError(sourceLocation: SourceLocation = #_sourceLocation) -> TransactionError? {
        Self.transactionError(desktop.map { _ in () }, side: "desktop", sourceLocation: sourceLocation)
    }

    /// The phone's error as a ``TransactionError``, recording an issue if it is anything else.
    func phoneError(sourceLocation: SourceLocation = #_sourceLocation) -> TransactionError? {
        Self.transactionError(phone, side: "phone", sourceLocation: sourceLocation)
    }

    private static func transactionError(
        _ result: Result<Void, any Error>, side: String, sourceLocation: SourceLocation
    ) -> TransactionError? {
        switch result {
        case .success:
            Issue.record("the \(side) succeeded; a TransactionError was expected", sourceLocation: sourceLocation)
            return nil
        case .failure(let error as TransactionError):
            return error
        case .failure(let error):
            Issue.record("the \(side) threw \(type(of: error)) \(error), not a TransactionError", sourceLocation: sourceLocation)
            return nil
        }
    }
}

/// One QR transaction between a desktop (``ClientDriver``) and a phone (``AuthenticatorDriver``) over
/// a running relay and the UDP proximity stub, like ``HybridHarness/transact``, with hooks to
/// replace or wrap either side's transports.
struct SessionRig: Sendable {
    /// `ws://127.0.0.1:PORT` of the relay.
    var relayURL: String
    /// The phone answering the request.
    var phone: SimulatedPhone
    /// Limits for both sides.
    /// Limits for both sides: `.fast` (5 s per wait); a test that expects one wait to end a
    /// transaction shortens that one.
    var timeouts: SessionTimeouts = .fast
    /// The phone's limits, when they must differ from the desktop's (`nil`: ``timeouts``): a test
    /// that needs one side's timer to fire first gives the other a longer one, rather than rely on
    /// which of two equal timers a loaded machine runs first.
    var phoneTimeouts: SessionTimeouts? = nil
    /// RSSI the phone claims.
    var rssi: Int8 = ProximityDefaults.rssi
    /// Weakest RSSI the desktop accepts.
    var minRSSI: Int8 = ProximityDefaults.minRSSI
    /// The QR secret of the desktop's session (random unless set, e.g. to let an intruder know it).
    var qrSecret: [UInt8]? = nil
    /// The `FIDO:/` URL the phone scans; by default the desktop's own.
    var phoneQR: @Sendable (ClientSession) -> String = { $0.url }
    /// Wraps the desktop's real transports.
    var desktopTransports: @Sendable (ClientDriver.Transports) -> ClientDriver.Transports = { $0 }
    /// Wraps the phone's real transports.
    var phoneTransports: @Sendable (AuthenticatorDriver.Transports) -> AuthenticatorDriver.Transports = { $0 }
    /// Answers the phone's request instead of ``phone`` (a user who takes their time).
    var respond: AuthenticatorDriver.Responder? = nil
    /// Progress of both sides.
    var events: @Sendable (SessionEvent) -> Void = { _ in }
    /// The desktop's ``ClientDriver/run(session:request:transports:timeouts:events:outcomeReady:)`` hook.
    var outcomeReady: @Sendable (ClientDriver.Outcome) async -> Void = { _ in }
    /// The desktop starts its advert timeout only once the phone advertises (at most 10 s later),
    /// so that a short advert timeout measures the proximity check, not how quickly a busy machine
    /// opens the phone's tunnel.
    var desktopWaitsForAdvertising = false

    init(relayURL: String, phone: SimulatedPhone) {
        self.relayURL = relayURL
        self.phone = phone
    }

    /// Runs one transaction and waits for both sides. A hang (neither side returning within
    /// `limit`) is recorded as an issue and both sides are cancelled.
    func run(request: [UInt8], hint: QRPayload.RequestType, limit: Duration = .seconds(30)) async throws -> RigOutcome {
        let session = ClientSession(requestType: hint, timestamp: unixNow(), qrSecret: qrSecret)
        let scanner = ProximityScanner<[UInt8]>(
            minRSSI: minRSSI, logger: quietLogger,
            matcher: ClientDriver.Transports.advertMatcher(eidKey: session.keys.eidKey))
        let proximity = try await scanner.start()
        let phoneSession = try AuthenticatorSession(qr: QRPayload(url: phoneQR(session)), getInfo: phone.getInfo)
        var desktopBase = ClientDriver.Transports.loopback(relayURL: relayURL, scanner: scanner, logger: quietLogger)
        var phoneBase = AuthenticatorDriver.Transports.loopback(
            relayURL: relayURL, proximity: proximity, rssi: rssi, logger: quietLogger)
        if desktopWaitsForAdvertising {
            let advertising = Latch()
            let (nextAdvert, advertise) = (desktopBase.nextAdvert, phoneBase.advertise)
            desktopBase.nextAdvert = { timeout in
                await advertising.wait(atMost: .seconds(10))
                return try await nextAdvert(timeout)
            }
            phoneBase.advertise = { advert in
                let advertisement = try await advertise(advert)
                advertising.open()
                return advertisement
            }
        }
        let desktop = desktopTransports(desktopBase)
        let phoneSide = phoneTransports(phoneBase)
        let (timeouts, events, phone, outcomeReady) = (self.timeouts, self.events, self.phone, self.outcomeReady)
        let respond = self.respond ?? { request in phone.respond(to: request, now: unixNow()) }
        let phoneTimeouts = self.phoneTimeouts ?? timeouts
        let start = ContinuousClock.now
        let outcome = try await bounded(limit, "transaction") {
            async let phoneResult: Result<Void, any Error> = Result {
                try await AuthenticatorDriver.run(
                    session: phoneSession, transports: phoneSide, timeouts: phoneTimeouts, events: events, respond: respond)
            }
            async let desktopResult: Result<ClientDriver.Outcome, any Error> = Result {
                try await ClientDriver.run(
                    session: session, request: request, transports: desktop,
                    timeouts: timeouts, events: events, outcomeReady: outcomeReady)
            }
            return await RigOutcome(desktop: desktopResult, phone: phoneResult, elapsed: .zero)
        }
        await scanner.stop()
        return RigOutcome(desktop: outcome.desktop, phone: outcome.phone, elapsed: ContinuousClock.now - start)
    }
}

extension Result where Failure == any Error {
    /// Runs an async throwing body and captures its result.
    init(catching body: () async throws -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
    }
}

/// Thrown by ``bounded(_:_:_:)`` when the body does not finish in time.
struct HangError: Error, CustomStringConvertible {
    var what: String
    var limit: Duration
    var description: String { "\(what) did not finish within \(limit): a hang" }
}

/// Runs `body`, failing with ``HangError`` (and cancelling `body`) if it takes longer than `limit`.
func bounded<T: Sendable>(
    _ limit: Duration, _ what: String, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try? await Task.sleep(for: limit)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw HangError(what: what, limit: limit)
        }
        return value
    }
}

/// A passkey made directly (no registration round trip) and the record a relying party would keep.
struct Account: Sendable {
    var passkey: Passkey
    var credential: RegisteredCredential

    /// A fresh ES256 passkey for `userName` at `relyingParty`.
    static func make(_ userName: String, at relyingParty: RelyingParty = exampleRP) -> Account {
        let key = RandomSource.system.signingKey()
        let credentialID = RandomSource.system.bytes(16)
        let userID = Array(userName.utf8)
        let now = unixNow()
        let passkey = Passkey(
            credentialID: credentialID, rpID: relyingParty.id, rpName: relyingParty.id, userID: userID,
            userName: userName, userDisplayName: userName, privateKey: Array(key.rawRepresentation), createdAt: now)
        let credential = RegisteredCredential(
            credentialId: credentialID, publicKey: CBOR.encode(COSEKey(publicKey: key.publicKey).cbor), signCount: 0,
            userId: userID, userName: userName, rpId: relyingParty.id, createdAt: now, attestationFormat: "none",
            backupEligible: true, backupState: true)
        return Account(passkey: passkey, credential: credential)
    }
}

/// A ``TunnelTransport`` that passes everything to `inner` and lets a test act at chosen points:
/// after the n-th successful send, when a message is received, or when the driver closes it.
final class TunnelTap: TunnelTransport {
    /// Called after every successful send with the number of messages sent so far.
    typealias AfterSend = @Sendable (_ sent: Int, _ inner: any TunnelTransport) async -> Void
    /// Called with every received message and the number received so far (this one included);
    /// returns the message to hand to the driver, or `nil` to drop it.
    typealias OnReceive = @Sendable (_ received: Int, _ message: [UInt8]) async -> [UInt8]?

    let inner: any TunnelTransport
    private let afterSend: AfterSend
    private let onReceive: OnReceive
    private let onClose: @Sendable () -> Void
    private let counters = Mutex((sent: 0, received: 0))

    init(
        _ inner: any TunnelTransport, afterSend: @escaping AfterSend = { _, _ in },
        onReceive: @escaping OnReceive = { _, message in message }, onClose: @escaping @Sendable () -> Void = {}
    ) {
        self.inner = inner
        self.afterSend = afterSend
        self.onReceive = onReceive
        self.onClose = onClose
    }

    func send(_ message: [UInt8]) async throws {
        try await inner.send(message)
        let sent = counters.withLock { counters in
            counters.sent += 1
            return counters.sent
        }
        await afterSend(sent, inner)
    }

    func receive(timeout: Duration) async throws -> [UInt8] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let message = try await inner.receive(timeout: max(deadline - ContinuousClock.now, .zero))
            let received = counters.withLock { counters in
                counters.received += 1
                return counters.received
            }
            if let passed = await onReceive(received, message) { return passed }
        }
    }

    /// Nothing: a received message goes through `onReceive`, which is asynchronous, so only
    /// `receive` hands messages on.
    func receiveIfReady() -> [UInt8]? { nil }

    func close(code: WebSocketCloseCode, reason: String) async {
        onClose()
        await inner.close(code: code, reason: reason)
    }
}

extension AuthenticatorDriver.Transports {
    /// The same transports with the phone's tunnel wrapped by `wrap`.
    func wrappingTunnel(_ wrap: @escaping @Sendable (any TunnelTransport) -> any TunnelTransport) -> Self {
        let createTunnel = self.createTunnel
        return Self(
            createTunnel: { path, timeout in
                let (tunnel, routingID) = try await createTunnel(path, timeout)
                return (wrap(tunnel), routingID)
            },
            advertise: advertise)
    }
}

extension ClientDriver.Transports {
    /// The same transports with the desktop's tunnel wrapped by `wrap`.
    func wrappingTunnel(_ wrap: @escaping @Sendable (any TunnelTransport) -> any TunnelTransport) -> Self {
        let connect = self.connect
        return Self(
            nextAdvert: nextAdvert,
            connect: { path, domain, timeout in wrap(try await connect(path, domain, timeout)) })
    }
}

/// Starts a ``HybridHarness`` (quiet logger), runs `body`, and always shuts it down before returning.
func withHarness<T>(
    _ configuration: RelayConfiguration = RelayConfiguration(), _ body: (HybridHarness) async throws -> T
) async throws -> T {
    let harness = try await HybridHarness.start(configuration: configuration, logger: quietLogger)
    do {
        let result = try await body(harness)
        await harness.shutdown()
        return result
    } catch {
        await harness.shutdown()
        throw error
    }
}

/// A one-shot signal: ``wait(atMost:)`` returns once ``open()`` was called, or after the limit.
final class Latch: Sendable {
    private let isOpen = Mutex(false)

    /// Opens the latch; waiters return within a few milliseconds.
    func open() {
        isOpen.withLock { $0 = true }
    }

    /// Returns once the latch is open, or after `limit`.
    func wait(atMost limit: Duration) async {
        let deadline = ContinuousClock.now + limit
        while !isOpen.withLock({ $0 }), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(2))
        }
    }
}
