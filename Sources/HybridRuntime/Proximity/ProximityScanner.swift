import Logging
import NIOCore
import NIOPosix
import Synchronization

/// The desktop side of the proximity stub: listens for adverts on a loopback UDP port and hands
/// each plausible one to a matcher (the session's trial decryption).
///
/// For every datagram, in order: it must be 23 bytes, name a known service UUID, have
/// RSSI ≥ `minRSSI`, not repeat an advert that already matched, and be matched by the matcher.
/// Everything else is ignored and counted in ``statistics``, as Chromium's discovery ignores
/// whatever it cannot use, including an advert that authenticates under the session's key but
/// whose plaintext breaks a rule (``Verdict/invalid(reason:)``).
public final class ProximityScanner<Match: Sendable>: Sendable {
    /// The scanner's counters.
    public typealias Statistics = ProximityStatistics
    /// What a matcher says of one 20-byte advert.
    public enum Verdict: Sendable {
        /// The advert belongs to this session; `Match` is what a wait returns (e.g. the advert).
        case matched(Match)
        /// Another session's advert, or noise (wrong tag): normal traffic.
        case notOurs
        /// Authenticated by this session's key, but not usable (e.g. a reserved byte that is not
        /// zero, an unknown tunnel domain): ignored like `notOurs`, and counted apart with the
        /// first reason, so that a timeout can say what was wrong with the phone's adverts.
        case invalid(reason: String)
    }
    /// Judges one 20-byte advert (e.g. by trial decryption under the session's key). Runs on an
    /// event loop: keep it fast and non-blocking.
    public typealias Matcher = @Sendable (_ advert: [UInt8]) -> Verdict

    private let host: String
    private let port: Int
    private let group: any EventLoopGroup
    private let logger: Logger
    private let core: ScannerCore<Match>
    /// The shared scan socket this scanner attaches to instead of binding its own, if any.
    private let hub: ProximityHub?
    private let channel = Mutex<Channel?>(nil)
    private let started = Mutex(false)

    /// Creates a scanner; nothing listens until ``start()``.
    ///
    /// - Parameters:
    ///   - host: loopback address to bind.
    ///   - port: UDP port; 0 picks a free one (the CLI default is ``ProximityDefaults/scannerPort``).
    ///   - minRSSI: weakest accepted RSSI in dBm (default -70).
    ///   - group: the event loop group the UDP socket runs on.
    ///   - logger: where dropped and matched datagrams are logged (debug level).
    ///   - matcher: decides whether an advert is this session's.
    public convenience init(
        host: String = "127.0.0.1",
        port: Int = 0,
        minRSSI: Int8 = ProximityDefaults.minRSSI,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "hybrid-sim.proximity"),
        matcher: @escaping Matcher
    ) {
        self.init(host: host, port: port, minRSSI: minRSSI, group: group, hub: nil, logger: logger, matcher: matcher)
    }

    /// A scanner that listens on `hub`'s scan socket (``ProximityHub``) from ``start()`` to
    /// ``stop()`` instead of binding a socket of its own; it hears every datagram sent there and
    /// keeps its own counters and matches. `group`: where its wait's timer runs.
    convenience init(
        sharing hub: ProximityHub, minRSSI: Int8 = ProximityDefaults.minRSSI, group: any EventLoopGroup,
        logger: Logger = Logger(label: "hybrid-sim.proximity"), matcher: @escaping Matcher
    ) {
        self.init(
            host: hub.scanEndpoint.host, port: hub.scanEndpoint.port, minRSSI: minRSSI, group: group, hub: hub,
            logger: logger, matcher: matcher)
    }

    private init(
        host: String, port: Int, minRSSI: Int8, group: any EventLoopGroup, hub: ProximityHub?, logger: Logger,
        matcher: @escaping Matcher
    ) {
        self.host = host
        self.port = port
        self.group = group
        self.hub = hub
        self.logger = logger
        // A wait's timeout is a timer on one of the group's loops (with a one-loop group, the
        // loop that delivers the adverts; the inbox takes a lock either way), not a sleeping task.
        self.core = ScannerCore(minRSSI: minRSSI, matcher: matcher, logger: logger, timerLoop: group.next())
    }

    /// Binds the UDP socket. Returns the bound endpoint (real port when 0 was asked for).
    ///
    /// - Throws: `.invalidAddress` (not loopback), `.bindFailed`, `.invalidState` if already started.
    @discardableResult
    public func start() async throws -> ProximityEndpoint {
        guard LoopbackAddress.isLoopback(host) else {
            throw RuntimeError(.invalidAddress, "proximity host \(host) is not a loopback address")
        }
        try started.withLock { started in
            guard !started else { throw RuntimeError(.invalidState, "proximity scanner already started") }
            started = true
        }
        let core = self.core
        if let hub {
            hub.attach(core)
            return hub.scanEndpoint
        }
        let bound: Channel
        do {
            bound = try await ProximityScanHandler.bindSocket(
                to: SocketAddress.proximity(host: host, port: port), group: group) { core.process($0) }
        } catch {
            started.withLock { $0 = false }
            throw RuntimeError(.bindFailed, "proximity scanner could not bind udp://\(host):\(port): \(RuntimeError.systemReason(error))")
        }
        channel.withLock { $0 = bound }
        let endpoint = ProximityEndpoint(host: host, port: bound.localAddress?.port ?? port)
        logger.info("scanning for adverts on \(endpoint)")
        return endpoint
    }

    /// Waits for the next advert the matcher accepts.
    ///
    /// - Throws: `.noNearbyAuthenticator` after `timeout`, carrying the counters in
    ///   ``RuntimeError/proximityStatistics`` and in its message; `.invalidState` after ``stop()``.
    public func waitForMatch(timeout: Duration) async throws -> (match: Match, rssi: Int8) {
        let found = try await waitForMatchCountingIgnored(timeout: timeout)
        return (found.match, found.rssi)
    }

    /// ``waitForMatch(timeout:)`` with the datagrams ignored before the match (counted when it was
    /// accepted, so the phone's repeats of the advert that arrive after it are not among them,
    /// however late this call reads them: a desktop that did not run for a while counted dozens).
    public func waitForMatchCountingIgnored(timeout: Duration) async throws -> (match: Match, rssi: Int8, ignoredBefore: Int) {
        do {
            let found = try await core.matches.next(timeout: timeout, operation: "waiting for a nearby authenticator")
            return (found.match, found.rssi, found.ignoredBefore)
        } catch let error as RuntimeError where error.code == .timeout {
            let statistics = core.statistics
            throw RuntimeError(
                .noNearbyAuthenticator,
                "no nearby authenticator within \(timeout.humanReadable): \(statistics)",
                proximityStatistics: statistics
            )
        }
    }

    /// The counters so far.
    public var statistics: ProximityStatistics { core.statistics }

    /// Returns once a ``waitForMatch(timeout:)`` is pending (or the scanner has stopped): a
    /// hand-off for tests that need the wait to have begun before they act.
    func waitIsPending() async { await core.matches.readerIsWaiting() }

    /// Closes the socket (detaches from a shared one); a pending ``waitForMatch(timeout:)`` throws
    /// `.invalidState`. Idempotent.
    public func stop() async {
        core.matches.finish(RuntimeError(.invalidState, "proximity scanner stopped"))
        hub?.detach(core)
        let bound = channel.withLock { channel in
            defer { channel = nil }
            return channel
        }
        try? await bound?.close().get()
    }
}

/// One accepted advert.
struct ScannerMatch<Match: Sendable>: Sendable {
    var match: Match
    var rssi: Int8
    /// The datagrams ignored before this match (counted when it was accepted: the phone's repeats
    /// that come after it are not "before").
    var ignoredBefore = 0
}

/// The scanner's filter chain and counters, shared by the channel handler and the public API.
final class ScannerCore<Match: Sendable>: Sendable {
    let matches: MessageInbox<ScannerMatch<Match>>
    private let minRSSI: Int8
    private let matcher: ProximityScanner<Match>.Matcher
    private let logger: Logger
    private let state: Mutex<(statistics: ProximityStatistics, used: Set<[UInt8]>)>

    init(minRSSI: Int8, matcher: @escaping ProximityScanner<Match>.Matcher, logger: Logger, timerLoop: EventLoop? = nil) {
        self.matches = MessageInbox(timerLoop: timerLoop)
        self.minRSSI = minRSSI
        self.matcher = matcher
        self.logger = logger
        self.state = Mutex((ProximityStatistics(minRSSI: minRSSI), []))
    }

    var statistics: ProximityStatistics { state.withLock { $0.statistics } }

    /// Runs one datagram through the filters.
    func process(_ bytes: [UInt8]) {
        let datagram: ProximityDatagram?
        do {
            datagram = try ProximityDatagram(parsing: bytes)
        } catch let error as RuntimeError {
            state.withLock { state in
                state.statistics.received += 1
                if error.code == .unknownServiceUUID {
                    state.statistics.unknownServiceUUID += 1
                    if state.statistics.firstUnknownServiceUUID == nil {
                        state.statistics.firstUnknownServiceUUID = ProximityDatagram.serviceUUIDField(bytes)
                    }
                } else {
                    state.statistics.wrongLength += 1
                }
            }
            return
        } catch {
            datagram = nil
        }
        guard let datagram else { return }
        let candidate: Bool = state.withLock { state in
            state.statistics.received += 1
            if datagram.rssi < minRSSI {
                state.statistics.tooFar += 1
                state.statistics.strongestTooFarRSSI = max(state.statistics.strongestTooFarRSSI ?? .min, datagram.rssi)
                return false
            }
            if state.used.contains(datagram.advert) {
                state.statistics.replayed += 1
                return false
            }
            return true
        }
        guard candidate else { return }
        // The matcher runs outside the lock so it may read the statistics.
        let verdict = matcher(datagram.advert)
        // The datagrams ignored so far, when accepted (`nil`: not accepted).
        let accepted: Int? = state.withLock { state in
            switch verdict {
            case .notOurs:
                state.statistics.notOurs += 1
                return nil
            case .invalid(let reason):
                state.statistics.invalid += 1
                if state.statistics.invalidReason == nil {
                    state.statistics.invalidReason = reason
                    logger.warning("ignoring an advert for this session that breaks a rule: \(reason)")
                }
                return nil
            case .matched:
                guard state.used.insert(datagram.advert).inserted else {
                    state.statistics.replayed += 1
                    return nil
                }
                state.statistics.matched += 1
                return state.statistics.received - state.statistics.matched
            }
        }
        if let ignored = accepted, case .matched(let match) = verdict {
            logger.debug("advert accepted at rssi \(datagram.rssi)")
            matches.push(ScannerMatch(match: match, rssi: datagram.rssi, ignoredBefore: ignored))
        }
    }
}

/// Feeds received datagrams to a ``ScannerCore`` (or to the scanners of a ``ProximityHub``).
final class ProximityScanHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>

    private let deliver: @Sendable ([UInt8]) -> Void

    init(deliver: @escaping @Sendable ([UInt8]) -> Void) {
        self.deliver = deliver
    }

    /// Binds a UDP socket at `address` that hands every datagram's bytes to `deliver`.
    static func bindSocket(
        to address: SocketAddress, group: any EventLoopGroup, deliver: @escaping @Sendable ([UInt8]) -> Void
    ) async throws -> Channel {
        // No SO_REUSEADDR: on Linux it would let a second scanner share the UDP port silently.
        try await DatagramBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ProximityScanHandler(deliver: deliver))
                }
            }
            .bind(to: address)
            .get()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        deliver(Array(envelope.data.readableBytesView))
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // A UDP socket stays usable after e.g. ECONNREFUSED from an ICMP message: keep listening.
    }
}
