import CTAP2
import Foundation
import HybridCore
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// A complete hybrid lab in one process for other people's protocol tests: a tunnel relay on an
/// ephemeral loopback port, and simulated desktops and phones that talk to it over real sockets
/// (WebSocket tunnels, UDP proximity adverts).
///
/// ```swift
/// let harness = try await HybridHarness.start()
/// let phone = SimulatedPhone()
/// let rp = RelyingParty(id: "example.com", origin: "https://example.com")
/// let registered = try await harness.register(on: phone, relyingParty: rp, userName: "alice")
/// let signedIn = try await harness.signIn(on: phone, relyingParty: rp, knownCredentials: [registered])
/// await harness.shutdown()
/// ```
public final class HybridHarness: Sendable {
    /// Options for one transaction.
    public struct TransactionOptions: Sendable {
        /// RSSI the phone advertises with.
        public var rssi: Int8 = ProximityDefaults.rssi
        /// Weakest RSSI the desktop accepts.
        public var minRSSI: Int8 = ProximityDefaults.minRSSI
        /// Limits on every wait.
        public var timeouts: SessionTimeouts = .fast
        /// Progress of both sides.
        public var events: @Sendable (SessionEvent) -> Void = { _ in }
        /// Receives each side's `SessionKeys` when its handshake completes (a key log); in a linked
        /// transaction the desktop's only.
        public var keyLog: (@Sendable (_ side: String, SessionKeys) -> Void)? = nil
        /// Called by ``HybridHarness/register(on:relyingParty:userName:userID:options:)`` and
        /// ``HybridHarness/signIn(on:relyingParty:knownCredentials:allowCredentials:options:)`` of a
        /// QR transaction once the relying party verified the response, which it does as soon as the
        /// desktop has the response, while the tunnel's closing handshakes still run (the call
        /// returns after they finished). `hybrid-sim bench` times a sign-in up to here.
        public var verified: (@Sendable () -> Void)? = nil

        /// Defaults suited to tests (short timeouts).
        public init() {}
    }

    /// The relay every transaction goes through.
    public let relay: TunnelRelay
    /// `ws://127.0.0.1:PORT`.
    public let relayURL: String
    /// Where the relay's shards and the sockets of QR transactions (both tunnels, the scanner and the
    /// advertiser) run.
    let group: any EventLoopGroup
    let logger: Logger
    /// The proximity stub's two UDP sockets, kept for the harness's lifetime and shared by its QR
    /// transactions (`nil`: each transaction binds its own, as the `desktop` and `phone` programs do).
    let proximity: ProximityHub?
    /// When ``group`` is one loop: the loop as the task executor both sides' drivers prefer, so a
    /// transaction's tasks run on the thread of its sockets without a switch of executors at every
    /// async call (``EventLoopTaskExecutor``).
    let taskExecutor: EventLoopTaskExecutor?

    private init(relay: TunnelRelay, relayURL: String, group: any EventLoopGroup, logger: Logger, proximity: ProximityHub?) {
        self.relay = relay
        self.relayURL = relayURL
        self.group = group
        self.logger = logger
        self.proximity = proximity
        self.taskExecutor = (group as? any EventLoop).map(EventLoopTaskExecutor.init)
    }

    /// Starts a relay on an ephemeral loopback port.
    ///
    /// - Parameters:
    ///   - configuration: the relay's limits.
    ///   - group: where the relay's shards (one per loop, as ``RelayConfiguration/eventLoops``
    ///     says) and the sockets of QR transactions run. One `EventLoop` puts a whole transaction on
    ///     one thread, the relay's accepting and both sides' driver tasks included (a one-shard relay
    ///     accepts on its loop; the drivers prefer the loop as their task executor): what
    ///     `hybrid-sim bench` measures.
    ///   - logger: for the relay and both sides.
    public static func start(
        configuration: RelayConfiguration = .init(),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "hybrid-sim.harness")
    ) async throws -> HybridHarness {
        let relay = TunnelRelay(configuration: configuration, group: group, logger: logger)
        let endpoint = try await relay.start()
        let proximity: ProximityHub
        do {
            proximity = try await ProximityHub.start(group: group)
        } catch {
            await relay.shutdown()
            throw error
        }
        return HybridHarness(relay: relay, relayURL: endpoint.url, group: group, logger: logger, proximity: proximity)
    }

    /// A harness whose transactions go through a relay that already runs at `relayURL` (another
    /// process: the hostile soak measures it from outside). Its ``relay`` is never started.
    static func using(relayURL: String, logger: Logger) -> HybridHarness {
        HybridHarness(
            relay: TunnelRelay(logger: logger), relayURL: relayURL, group: MultiThreadedEventLoopGroup.singleton,
            logger: logger, proximity: nil)
    }

    /// Stops the relay (closing any open tunnel) and closes the proximity sockets.
    public func shutdown() async {
        await relay.shutdown()
        await proximity?.close()
    }

    /// Runs one QR transaction: a desktop session showing a QR code, a phone that "scans" it, both
    /// over the relay and the proximity stub; `request` is CTAP2 (command ‖ CBOR). Returns the
    /// desktop's outcome after both sides finished.
    ///
    /// With `linking`, the QR code says the desktop can link and the phone sends that identity's
    /// signed linking information (``ClientDriver/Outcome/linking``, verified).
    public func transact(
        request: [UInt8], hint: QRPayload.RequestType, phone: some HarnessAuthenticator, options: TransactionOptions = .init(),
        linking: AuthenticatorSession.LinkingIdentity? = nil
    ) async throws -> ClientDriver.Outcome {
        try await transact(request: request, hint: hint, phone: phone, options: options, linking: linking) { $0 }
    }

    /// ``transact(request:hint:phone:options:linking:)`` that runs `finish` on the desktop's outcome
    /// as soon as the desktop has the response (before the closing handshakes) and returns what
    /// `finish` returned, or throws what it threw, once both sides finished.
    func transact<Value: Sendable>(
        request: [UInt8], hint: QRPayload.RequestType, phone: some HarnessAuthenticator, options: TransactionOptions,
        linking: AuthenticatorSession.LinkingIdentity? = nil,
        finish: @escaping @Sendable (ClientDriver.Outcome) throws -> Value
    ) async throws -> Value {
        let finished = Mutex<Result<Value, any Error>?>(nil)
        var desktopSession = ClientSession(
            requestType: hint, timestamp: UInt64(Date().timeIntervalSince1970), supportsLinking: linking != nil)
        desktopSession.keyLog = Self.keyLogHook(options.keyLog, side: "desktop")
        let session = desktopSession
        let group = self.group
        let matcher = ClientDriver.Transports.advertMatcher(eidKey: session.keys.eidKey)
        let scanner =
            if let hub = self.proximity {
                ProximityScanner<[UInt8]>(sharing: hub, minRSSI: options.minRSSI, group: group, logger: logger, matcher: matcher)
            } else {
                ProximityScanner<[UInt8]>(minRSSI: options.minRSSI, group: group, logger: logger, matcher: matcher)
            }
        var authenticatorSession = try AuthenticatorSession(qr: QRPayload(url: session.url), getInfo: phone.getInfo, linking: linking)
        authenticatorSession.keyLog = Self.keyLogHook(options.keyLog, side: "phone")
        let phoneSession = authenticatorSession
        let proximity = try await scanner.start()
        let relayURL = self.relayURL
        let logger = self.logger
        let hub = self.proximity
        _ = try await Self.stopping(scanner) { try await Self.runBoth(
            executor: taskExecutor,
            phone: {
                try await AuthenticatorDriver.run(
                    session: phoneSession,
                    transports: .loopback(
                        relayURL: relayURL, proximity: proximity, rssi: options.rssi, serviceUUID: .fido,
                        advertInterval: ProximityDefaults.advertInterval, group: group, logger: logger, hub: hub),
                    timeouts: options.timeouts, events: options.events
                ) { request in
                    await phone.respond(to: request, now: UInt64(Date().timeIntervalSince1970))
                }
            },
            desktop: {
                try await ClientDriver.run(
                    session: session, request: request,
                    transports: .loopback(relayURL: relayURL, scanner: scanner, group: group, logger: logger),
                    timeouts: options.timeouts, events: options.events,
                    outcomeReady: { outcome in
                        let result = Result { try finish(outcome) }
                        finished.withLock { $0 = result }
                    })
            }) }
        guard let result = finished.withLock({ $0 }) else {
            preconditionFailure("ClientDriver.run hands its outcome to outcomeReady before it returns it")
        }
        return try result.get()
    }

    /// Runs `body`, then stops `scanner` whichever way `body` ended, before returning: a caller that
    /// has the result finds the scanner detached (a stop in an unstructured task after a `defer`
    /// left it attached for a moment after the transaction returned).
    static func stopping<Value: Sendable>(
        _ scanner: ProximityScanner<[UInt8]>, _ body: () async throws -> Value
    ) async throws -> Value {
        do {
            let value = try await body()
            await scanner.stop()
            return value
        } catch {
            await scanner.stop()
            throw error
        }
    }

    /// ``TransactionOptions/keyLog`` for one side's session.
    static func keyLogHook(
        _ log: (@Sendable (String, SessionKeys) -> Void)?, side: String
    ) -> (@Sendable (SessionKeys) -> Void)? {
        guard let log else { return nil }
        return { keys in log(side, keys) }
    }

    /// Registers a new passkey for `userName` on `phone` and verifies it as `relyingParty`.
    public func register(
        on phone: some HarnessAuthenticator, relyingParty: RelyingParty, userName: String, userID: [UInt8]? = nil,
        options: TransactionOptions = .init()
    ) async throws -> RegisteredCredential {
        let ceremony = Self.registration(relyingParty: relyingParty, userName: userName, userID: userID)
        return try await transact(request: ceremony.requestBytes, hint: .makeCredential, phone: phone, options: options) {
            outcome in
            let credential = try ceremony.verify(response: outcome.response, now: UInt64(Date().timeIntervalSince1970)).credential
            options.verified?()
            return credential
        }
    }

    /// Signs in with a passkey on `phone` and verifies the assertion as `relyingParty` against
    /// `knownCredentials`; returns the credential with its new signature counter.
    public func signIn(
        on phone: some HarnessAuthenticator, relyingParty: RelyingParty, knownCredentials: [RegisteredCredential],
        allowCredentials: [[UInt8]] = [], options: TransactionOptions = .init()
    ) async throws -> RegisteredCredential {
        let ceremony = Self.authentication(relyingParty: relyingParty, allowCredentials: allowCredentials)
        return try await transact(request: ceremony.requestBytes, hint: .getAssertion, phone: phone, options: options) {
            outcome in
            let credential = try ceremony.verify(response: outcome.response, knownCredentials: knownCredentials).credential
            options.verified?()
            return credential
        }
    }

    /// The registration `register` and `registerInMemory` run: a fresh challenge, and a fresh
    /// random user handle unless `userID` is given.
    static func registration(relyingParty: RelyingParty, userName: String, userID: [UInt8]?) -> Ceremony.Registration {
        let user = PublicKeyCredentialUserEntity(
            id: userID ?? RandomSource.system.bytes(16), name: userName, displayName: userName)
        return Ceremony.Registration(
            relyingParty: relyingParty, rpName: relyingParty.id, user: user, challenge: RandomSource.system.bytes(32))
    }

    /// The sign-in `signIn` and `signInInMemory` run, with a fresh challenge.
    static func authentication(relyingParty: RelyingParty, allowCredentials: [[UInt8]]) -> Ceremony.Authentication {
        Ceremony.Authentication(
            relyingParty: relyingParty, challenge: RandomSource.system.bytes(32), allowCredentials: allowCredentials)
    }
}
