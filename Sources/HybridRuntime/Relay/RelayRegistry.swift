import CTAP2
import HybridCore
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// A refused HTTP request: the status and a one-line explanation sent as the body.
struct RelayRejection: Sendable {
    var status: HTTPResponseStatus
    var reason: String
    /// The answer to a phone sending a revocation to the revoked contact ID itself (a listen that
    /// names itself revoked): what it asked for was done, so it is counted as
    /// ``RelayStatistics/revocationsReceived`` and logged at debug level, not as a refusal.
    var isRevocationReceipt = false
    /// Header fields the answer carries besides the fixed ones (a 426's `Sec-WebSocket-Version`).
    var headers: [(String, String)] = []

    /// The whole answer: a `text/plain` HTTP/1.1 response with the reason as its body.
    var response: String {
        OverCapacityHandler.fixedResponse(status, body: reason, headers: headers)
    }

    /// `408` for a request cut short by ``RelayConfiguration/upgradeTimeout``: a client too slow to
    /// send its head (a head that announces content is refused at once, as no endpoint takes any). A
    /// connection that sent nothing at all is closed without an answer.
    static func requestTimeout(after timeout: Duration) -> RelayRejection {
        RelayRejection(status: .requestTimeout, reason: "request not complete within \(timeout.humanReadable)")
    }
}

/// What the relay does with a WebSocket upgrade request.
enum UpgradeDecision {
    /// Upgrade with these extra 101 headers; the connection has claimed `side` of `tunnel`.
    case accept(HTTPHeaders, RelayTunnel, TunnelSide)
    /// Answer with an HTTP error instead.
    case reject(RelayRejection)
    /// Upgrade a phone's push channel (`/cable/listen/{contact ID}`) with these 101 headers.
    case listen(HTTPHeaders, [UInt8])
}

/// The relay counters, readable from any thread: the per-message ones are atomics (no lock on
/// the forwarding path, shared by every shard without contention on a lock), the rest sit behind
/// a lock.
final class RelayStatisticsBox: Sendable {
    private let state = Mutex(RelayStatistics())
    private let messagesRelayed = Atomic<Int>(0)
    private let bytesRelayed = Atomic<Int>(0)
    private let messagesBuffered = Atomic<Int>(0)
    private let openConnections = Atomic<Int>(0)
    private let openTunnels = Atomic<Int>(0)
    private let unjoinedTunnels = Atomic<Int>(0)

    /// A snapshot.
    var value: RelayStatistics {
        var snapshot = state.withLock { $0 }
        snapshot.openConnections = openConnections.load(ordering: .relaxed)
        snapshot.openTunnels = openTunnels.load(ordering: .relaxed)
        snapshot.messagesRelayed = messagesRelayed.load(ordering: .relaxed)
        snapshot.bytesRelayed = bytesRelayed.load(ordering: .relaxed)
        snapshot.messagesBuffered = messagesBuffered.load(ordering: .relaxed)
        return snapshot
    }

    /// Counts one message of `bytes` bytes delivered to its recipient.
    func recordRelayed(bytes: Int) {
        messagesRelayed.add(1, ordering: .relaxed)
        bytesRelayed.add(bytes, ordering: .relaxed)
    }

    /// Counts one message held for a recipient that has not joined yet.
    func recordBuffered() { messagesBuffered.add(1, ordering: .relaxed) }

    /// Counts a tunnel recording that could not be written, and why.
    func recordUnwrittenRecording(_ reason: String) {
        state.withLock {
            $0.recordingsNotWritten += 1
            $0.lastRecordingFailure = reason
        }
    }

    /// Counts an open connection unless `max` are open already (then `false`, nothing counted).
    func claimConnection(max: Int) -> Bool { claim(openConnections, max: max) }

    /// A counted connection closed.
    func releaseConnection() { openConnections.subtract(1, ordering: .relaxed) }

    /// The connections open now (one atomic load, no snapshot).
    var openConnectionCount: Int { openConnections.load(ordering: .relaxed) }

    /// Counts an open tunnel unless `max` are open already (then `false`, nothing counted).
    func claimTunnel(max: Int) -> Bool { claim(openTunnels, max: max) }

    /// A counted tunnel closed.
    func releaseTunnel() { openTunnels.subtract(1, ordering: .relaxed) }

    /// Counts one more tunnel waiting for its joiner if every waiting tunnel's joiner, this one's
    /// too, still finds a connection free under `maxConnections` (then `true`); `false`, nothing
    /// counted, when the joiner could not get in. The connections and the waiting tunnels are two
    /// counters read one after the other: under a burst a few more may pass than fit.
    func claimJoinerRoom(maxConnections: Int) -> Bool {
        let waiting = unjoinedTunnels.wrappingAdd(1, ordering: .relaxed).newValue
        if openConnections.load(ordering: .relaxed) + waiting <= maxConnections { return true }
        unjoinedTunnels.subtract(1, ordering: .relaxed)
        return false
    }

    /// A tunnel counted by ``claimJoinerRoom(maxConnections:)`` was joined or closed.
    func releaseJoinerRoom() { unjoinedTunnels.subtract(1, ordering: .relaxed) }

    /// A tunnel whose joiner left before its upgrade completed waits again: counted again, without
    /// the check (its room was there; the leaver's connection is released at the same time).
    func reclaimJoinerRoom() { unjoinedTunnels.add(1, ordering: .relaxed) }

    private func claim(_ counter: borrowing Atomic<Int>, max: Int) -> Bool {
        if counter.wrappingAdd(1, ordering: .relaxed).newValue <= max { return true }
        counter.subtract(1, ordering: .relaxed)
        return false
    }

    /// Applies `change` under the lock.
    func update(_ change: (inout RelayStatistics) -> Void) {
        state.withLock { change(&$0) }
    }

    /// Counts a refused request or connection under its HTTP status (``RelayStatistics/rejectedRequests``).
    func recordRefusal(status: Int) {
        update { $0.rejectedRequests[status, default: 0] += 1 }
    }
}

/// One shard of the relay's state: its open tunnels by ID and its open connections. Confined to
/// the shard's event loop (``RelayShards``); the relay-wide limits are counted in ``statistics``.
final class RelayRegistry {
    let eventLoop: EventLoop
    /// This shard's index and the number of shards (routing IDs name the shard of their tunnel).
    let shardIndex: Int
    let shardCount: Int
    let configuration: RelayConfiguration
    let logger: Logger
    let statistics: RelayStatisticsBox
    /// Listening phones and contact requests (the linked flow).
    private(set) lazy var directory = ContactDirectory(registry: self)
    /// Saves the directory's memory (``RelayConfiguration/contactPersistence``), if any.
    let contactSaver: ContactSaver?
    /// When this shard started: the contact grace counts from here (``ContactDirectory`` is made
    /// at the first linked request, which may come much later).
    let started = NIODeadline.now()
    private var tunnels: [[UInt8]: RelayTunnel] = [:]
    private var connections: [ObjectIdentifier: RelayConnection] = [:]
    /// The upgrade timeouts of this shard's connections (one timer for all of them).
    var upgradeDeadlines: DeadlineQueue<UpgradeWaiter>
    /// The closing handshakes of this shard's tunnel connections (one timer for all of them).
    var closeDeadlines: DeadlineQueue<Channel>
    private var lastConnectionSerial: UInt64 = 0
    private var isShuttingDown = false
    /// The pending-upgrade and per-source caps (``AdmissionLedger``).
    private(set) lazy var admission = AdmissionLedger(configuration: configuration, counts: admissionCounts)
    /// The relay-wide admission counts, shared with the other shards' registries.
    let admissionCounts: AdmissionCounts
    /// Budget of info-level log lines (peers can trigger them).
    let logLimiter = RelayLogLimiter()
    private var drained: EventLoopPromise<Void>?

    init(
        eventLoop: EventLoop,
        configuration: RelayConfiguration,
        statistics: RelayStatisticsBox,
        logger: Logger,
        shardIndex: Int = 0,
        shardCount: Int = 1,
        admissionCounts: AdmissionCounts = AdmissionCounts(),
        contactSaver: ContactSaver? = nil
    ) {
        self.admissionCounts = admissionCounts
        self.contactSaver = contactSaver
        self.eventLoop = eventLoop
        self.shardIndex = shardIndex
        self.shardCount = shardCount
        self.configuration = configuration
        self.statistics = statistics
        self.logger = logger
        self.upgradeDeadlines = DeadlineQueue(duration: configuration.upgradeTimeout)
        self.closeDeadlines = DeadlineQueue(duration: configuration.closeHandshakeTimeout)
    }

    // MARK: - Connections

    /// What happens to a newly accepted connection.
    enum Admission {
        /// Tracked; it gets the HTTP pipeline.
        case admitted
        /// The relay is shutting down: drop it.
        case shuttingDown
        /// ``RelayConfiguration/maxConnections`` are open: answer 503 without parsing anything.
        case overCapacity
    }

    /// Tracks a new connection unless the relay is shutting down or full. `counted`: the
    /// dispatcher already counted it against ``RelayConfiguration/maxConnections``.
    func connectionOpened(_ connection: RelayConnection, counted: Bool = false) -> Admission {
        guard !isShuttingDown else {
            if counted { statistics.releaseConnection() }
            return .shuttingDown
        }
        guard counted || statistics.claimConnection(max: configuration.maxConnections) else {
            _ = refuseOverCapacity()
            return .overCapacity
        }
        lastConnectionSerial &+= 1
        connection.serial = lastConnectionSerial
        connections[ObjectIdentifier(connection)] = connection
        return .admitted
    }

    /// Records and logs a connection refused because the relay was full (503); `false` (nothing
    /// recorded) while shutting down, when it is closed instead.
    func refuseOverCapacity() -> Bool {
        guard !isShuttingDown else { return false }
        statistics.recordRefusal(status: 503)
        logLimiter.info(logger, "refused a connection: \(configuration.maxConnections) connections open (503)")
        return true
    }

    /// The open connection `id` names, if any.
    func connection(_ id: ObjectIdentifier) -> RelayConnection? {
        connections[id]
    }

    /// Forgets a closed connection and releases a tunnel side it had claimed but never used.
    func connectionClosed(_ connection: RelayConnection) {
        if connections.removeValue(forKey: ObjectIdentifier(connection)) != nil {
            statistics.releaseConnection()
        }
        if case .reserved(let tunnel, let side) = connection.state {
            tunnel.releaseReservation(side)
        }
        if isShuttingDown, connections.isEmpty {
            drained?.succeed(())
        }
    }

    // MARK: - Decisions

    /// Validates an upgrade request and, when it is acceptable, claims the tunnel side it asks for;
    /// a contact request may wait (bounded) for its phone to listen. `requester` is the requesting
    /// connection (a contact whose desktop left while it waited is not pushed to the phone).
    func decision(for head: HTTPRequestHead, requester: any Channel) -> EventLoopFuture<UpgradeDecision> {
        // The target and the headers are read once for both the contact path and the others.
        let path = TunnelServicePath(parsing: head.uri)
        let listenID = path == nil ? TunnelServicePath.listenContactID(parsing: head.uri) : nil
        let checks = RequestChecks(
            originRefusal: configuration.originPolicy.check(head.headers), offersSubprotocol: Self.offersSubprotocol(head.headers))
        // Linked-phone requests belong to the directory's shard; the dispatcher routes them there by
        // their request line, so one that reached another shard was written in a form it does not
        // route (its own directory would answer from a memory of its own).
        var linked = listenID != nil
        if case .contact? = path { linked = true }
        if linked, !isShuttingDown, head.method == .GET, shardIndex != RelayShards.directoryShard {
            return eventLoop.makeSucceededFuture(Self.misrouted)
        }
        if !isShuttingDown, head.method == .GET, checks.offersSubprotocol, checks.originRefusal == nil,
            case .contact(let contactID)? = path
        {
            return directory.decideContact(contactID: contactID, head: head, requester: requester)
        }
        return eventLoop.makeSucceededFuture(decide(head, path: path, listenID: listenID, checks: checks))
    }

    /// The answer to a listen or contact request that reached a shard other than the directory's.
    private static let misrouted = UpgradeDecision.reject(RelayRejection(
        status: .badRequest,
        reason: "a linked-phone request must start with its request line, GET /cable/listen/… or GET /cable/contact/… (at most 8 bytes of empty lines before it)"))

    /// What ``decide(_:path:listenID:checks:)`` needs to know of a request's headers.
    private struct RequestChecks {
        /// Why the `Origin` is refused, or `nil`.
        var originRefusal: String?
        /// Whether `Sec-WebSocket-Protocol` offers `fido.cable`.
        var offersSubprotocol: Bool
    }

    /// The decision for every request but a contact request that passed its checks.
    /// `path` is the request target parsed (`nil` if it is none of `/cable/new|connect|contact`),
    /// `listenID` the contact ID of a `/cable/listen/…` target.
    private func decide(
        _ head: HTTPRequestHead, path parsed: TunnelServicePath?, listenID: [UInt8]?, checks: RequestChecks
    ) -> UpgradeDecision {
        if isShuttingDown {
            return .reject(RelayRejection(status: .serviceUnavailable, reason: "relay shutting down"))
        }
        guard let path = parsed ?? listenID.map({ .contact(contactID: $0) }) else {
            return .reject(RelayRejection(status: .notFound, reason: "no such endpoint"))
        }
        guard head.method == .GET else {
            return .reject(RelayRejection(status: .badRequest, reason: "only GET is supported"))
        }
        if let refusal = checks.originRefusal {
            return .reject(RelayRejection(status: .forbidden, reason: refusal))
        }
        guard checks.offersSubprotocol else {
            return .reject(RelayRejection(status: .badRequest, reason: "Sec-WebSocket-Protocol must offer fido.cable"))
        }
        if let listenID { return directory.decideListen(contactID: listenID, head: head) }
        let headers = Self.selectedSubprotocol
        switch path {
        case .new(let tunnelID):
            return openTunnel(tunnelID: tunnelID)

        case .connect(let routingID, let tunnelID):
            guard let tunnel = tunnels[tunnelID], tunnel.routingID == routingID, !tunnel.isClosed else {
                return .reject(RelayRejection(status: .notFound, reason: "unknown tunnel or routing ID"))
            }
            guard tunnel.joinerSlotIsFree else {
                return .reject(RelayRejection(status: .conflict, reason: "tunnel already joined"))
            }
            tunnel.reserveJoiner()
            statistics.update { $0.tunnelsJoined += 1 }
            return .accept(headers, tunnel, .joiner)

        case .contact:
            // Only reached with a bad method or subprotocol, which were refused above.
            return .reject(RelayRejection(status: .badRequest, reason: "contact requests are decided by decision(for:)"))
        }
    }

    /// Registers a new tunnel whose creator side is claimed by the caller (`/cable/new`, or a
    /// desktop's `/cable/contact`), with a fresh routing ID.
    func openTunnel(tunnelID: [UInt8], flow: TunnelRecording.Flow = .qr) -> UpgradeDecision {
        let headers = Self.selectedSubprotocol
        guard tunnels[tunnelID] == nil else {
            return .reject(RelayRejection(status: .conflict, reason: "tunnel ID already open"))
        }
        // A tunnel whose joiner would find the relay full strands its creator for its whole
        // timeout (a burst of phones' /cable/new taking every connection, each desktop's
        // /cable/connect then 503): refused now instead, while the creator can still say so.
        guard statistics.claimJoinerRoom(maxConnections: configuration.maxConnections) else {
            return .reject(
                RelayRejection(
                    status: .serviceUnavailable,
                    reason: "too many connections (\(configuration.maxConnections)) to open a tunnel its peer could join; "
                        + "try again later"))
        }
        guard statistics.claimTunnel(max: configuration.maxOpenTunnels) else {
            statistics.releaseJoinerRoom()
            return .reject(
                RelayRejection(
                    status: .serviceUnavailable,
                    reason: "too many open tunnels (\(configuration.maxOpenTunnels)); try again later"
                )
            )
        }
        var routingID =
            configuration.routingIDPrefix
            + RandomSource.system.bytes(HybridConstants.routingIDSize - configuration.routingIDPrefix.count)
        RelayShards.mark(&routingID, shard: shardIndex, count: shardCount)
        let tunnel = RelayTunnel(
            tunnelID: tunnelID,
            routingID: routingID,
            flow: flow,
            registry: self,
            eventLoop: eventLoop
        )
        if let directory = configuration.recordDirectory {
            tunnel.recorder = TunnelRecorder(
                directory: directory, flow: flow, tunnelID: tunnelID, routingID: routingID, logger: tunnel.logger,
                logLimiter: logLimiter, statistics: statistics)
        }
        tunnel.holdsJoinerRoom = true
        tunnels[tunnelID] = tunnel
        tunnel.startTimers()
        statistics.update { $0.tunnelsOpened += 1 }
        logLimiter.info(tunnel, "tunnel opened, routing ID \(Hex.encode(routingID, uppercase: true))")
        var accepted = headers
        accepted.add(name: HybridConstants.routingIDHeader, value: Hex.encode(routingID, uppercase: true))
        return .accept(accepted, tunnel, .creator)
    }

    /// The answer to a request that is not a usable WebSocket upgrade (no `Upgrade` header, bad
    /// WebSocket key or version, …), unless ``decide(_:)`` already chose one. `invalidUpgrade` is why
    /// an upgrade breaks RFC 6455 §4.1 (``RelayRequestHandler/upgrade(of:)``); it answers after the
    /// path and method checks, in place of the generic reason. `announcedBody` is the content a GET
    /// announces (``RelayRequestHandler/announcedBody(of:)``), refused after the same checks.
    func rejectionForPlainRequest(
        _ head: HTTPRequestHead, invalidUpgrade: String? = nil, announcedBody: String? = nil
    ) -> RelayRejection {
        if isShuttingDown {
            return RelayRejection(status: .serviceUnavailable, reason: "relay shutting down")
        }
        guard TunnelServicePath(parsing: head.uri) != nil || TunnelServicePath.listenContactID(parsing: head.uri) != nil else {
            return RelayRejection(status: .notFound, reason: "no such endpoint")
        }
        guard head.method == .GET else {
            return RelayRejection(status: .badRequest, reason: "only GET is supported")
        }
        if let announcedBody {
            return RelayRejection(
                status: .badRequest, reason: "a GET to the tunnel service carries no content; this one announces \(announcedBody)")
        }
        if invalidUpgrade == nil, head.headers.containsToken(named: "upgrade", "websocket", anyCase: true),
            let version = head.headers.first(name: "sec-websocket-version"), version != "13"
        {
            // RFC 6455 §4.2.2: the versions the server speaks go back in Sec-WebSocket-Version,
            // with 426 Upgrade Required, so that a client can try again with one.
            var rejection = RelayRejection(
                status: .upgradeRequired,
                reason: "WebSocket version 13 is required (RFC 6455 §4.2.2); the request offered \(PeerText.printable(version, limit: 40))")
            rejection.headers = [("Sec-WebSocket-Version", "13")]
            return rejection
        }
        return RelayRejection(status: .badRequest, reason: invalidUpgrade ?? "a WebSocket upgrade (version 13) is required")
    }

    /// Whether `Sec-WebSocket-Protocol` lists `fido.cable` (the header may hold a comma-separated list).
    static func offersSubprotocol(_ headers: HTTPHeaders) -> Bool {
        headers.containsToken(named: "sec-websocket-protocol", HybridConstants.webSocketProtocol)
    }

    /// The 101's `Sec-WebSocket-Protocol: fido.cable`.
    static let selectedSubprotocol = HTTPHeaders([("Sec-WebSocket-Protocol", HybridConstants.webSocketProtocol)])

    // MARK: - Bookkeeping called by tunnels

    /// A tunnel closed: forget it.
    func tunnelClosed(_ tunnel: RelayTunnel, code: WebSocketCloseCode?) {
        if tunnels[tunnel.tunnelID] === tunnel {
            tunnels[tunnel.tunnelID] = nil
        }
        if shardIndex == RelayShards.directoryShard { directory.tunnelClosed(tunnel) }
        statistics.releaseTunnel()
        statistics.update {
            $0.tunnelsClosed[code?.rawValue ?? WebSocketCloseCode.noStatusReceived.rawValue, default: 0] += 1
        }
    }

    /// Counts one message delivered to its recipient.
    func recordRelayed(bytes: Int) {
        statistics.recordRelayed(bytes: bytes)
    }

    /// Counts one message held for a side that has not joined.
    func recordBuffered() {
        statistics.recordBuffered()
    }

    /// Counts one refused request; `request` (the method and the target, its IDs cut as
    /// `TunnelServicePath.redactedTarget` cuts them) goes in the log line, so an implementer can see
    /// which request the relay did not take.
    func recordRejected(_ rejection: RelayRejection, request: String? = nil) {
        if rejection.isRevocationReceipt {
            statistics.update { $0.revocationsReceived += 1 }
            logger.debug("revocation recorded: \(rejection.status.code) \(rejection.reason)")
            return
        }
        statistics.recordRefusal(status: Int(rejection.status.code))
        let what = request.map { " (\(PeerText.printable($0, limit: 160)))" } ?? ""
        logLimiter.info(logger, "refused request: \(rejection.status.code) \(rejection.reason)\(what)")
    }

    // MARK: - Shutdown

    /// Closes every tunnel with 1001 and drops connections still in HTTP; the future completes once
    /// every connection is closed (stragglers are dropped after the close-handshake timeout).
    func shutdown() -> EventLoopFuture<Void> {
        if let drained { return drained.futureResult }
        isShuttingDown = true
        // No connection waits for an upgrade past this point (those not upgraded are answered or
        // closed below); the close deadlines keep running for the closing handshakes that follow.
        upgradeDeadlines.stop()
        if shardIndex == RelayShards.directoryShard { directory.shutdown() }
        let promise = eventLoop.makePromise(of: Void.self)
        drained = promise
        for tunnel in Array(tunnels.values) {
            tunnel.close(code: .goingAway, reason: "relay shutting down")
        }
        for connection in connections.values where !connection.isUpgraded {
            // A request begun gets its 503 rather than a reset (``RelayRequestHandler/ShuttingDown``).
            connection.channel.pipeline.syncOperations.fireUserInboundEventTriggered(RelayRequestHandler.ShuttingDown())
        }
        if connections.isEmpty {
            promise.succeed(())
        } else {
            let grace = TimeAmount(configuration.closeHandshakeTimeout) + .milliseconds(500)
            eventLoop.assumeIsolated().scheduleTask(in: grace) { [self] in
                for connection in self.connections.values {
                    connection.channel.close(promise: nil)
                }
            }
        }
        return promise.futureResult
    }
}
