import CTAP2
import HybridCore
import Logging
import NIOCore

/// One side of a tunnel: who opened it and who joined it.
enum TunnelSide: Sendable, Hashable, CustomStringConvertible {
    /// Opened the tunnel with `/cable/new` (the phone in the QR flow).
    case creator
    /// Joined it with `/cable/connect` (the desktop in the QR flow).
    case joiner

    /// The other side.
    var other: TunnelSide { self == .creator ? .joiner : .creator }

    /// The direction of messages this side sends.
    var outgoing: RelayDirection { self == .creator ? .creatorToJoiner : .joinerToCreator }

    var description: String { self == .creator ? "creator" : "joiner" }
}

/// A tunnel inside the relay: two peer slots, the messages waiting for a peer that has not joined
/// yet, per-peer counters and one timer for its lifetime and idle limits.
///
/// Confined to the event loop of its registry's shard: every method must be called on it. Both
/// peers' connections run on that loop too (``RelayDispatcher`` places them there), so no locking
/// is needed and relaying order is the loop's order.
///
/// The forwarding path, per message: ``RelayPeerHandler/channelRead(context:data:)`` (the peer's
/// binary frame, unmasked into its own `ByteBuffer`) → ``received(_:from:)`` (count, size check,
/// the optional hooks, forward or buffer) → ``RelayPeerHandler/deliver(_:)`` of the other side (the
/// same `ByteBuffer`, written as one binary frame, flushed when the sender's read burst ends). No
/// copy into `[UInt8]` and no closure unless a hook (observer, fault injector, recorder) is installed.
final class RelayTunnel {
    /// The state of one peer slot.
    enum Slot {
        /// Nobody has claimed this side yet (the joiner before `/cable/connect`).
        case empty
        /// A request for this side was accepted; its WebSocket is being set up.
        case reserved
        /// The peer's WebSocket is up; messages go straight to its handler.
        case attached(RelayPeerHandler)
        /// The peer left (close frame, EOF or error); nothing more is sent to it.
        case gone
    }

    /// The 16-byte tunnel ID (never logged in full).
    let tunnelID: [UInt8]
    /// The 3-byte routing ID handed to the creator.
    let routingID: [UInt8]
    /// Logger carrying the redacted tunnel ID as metadata; built when something is logged, so an
    /// open tunnel keeps no metadata dictionary of its own.
    var logger: Logger {
        var logger = registry.logger
        logger[metadataKey: "tunnel"] = "\(Hex.redactedPrefix(tunnelID))"
        return logger
    }

    /// Strong on purpose: the registry drops the tunnel when it closes, which ends the cycle.
    let registry: RelayRegistry
    private let eventLoop: EventLoop
    /// The relay's configuration, read through the registry: a tunnel keeps no copy of it (a copy
    /// was about 400 bytes of every open tunnel).
    private var configuration: RelayConfiguration { registry.configuration }
    private var creatorSlot = Slot.reserved
    private var joinerSlot = Slot.empty
    /// Messages waiting for each side to attach (allocated only when a message has to wait).
    private var waitingForCreator: CircularBuffer<ByteBuffer>?
    private var waitingForJoiner: CircularBuffer<ByteBuffer>?
    private var sentByCreator = 0
    private var sentByJoiner = 0
    /// Payload bytes held for a side that had not joined (``RelayConfiguration/maxBytesBeforeJoin``).
    private var bytesBeforeJoin = 0
    private var lastActivity: NIODeadline
    /// When the tunnel's lifetime ends (set by ``startTimers()``).
    private var lifetimeEnd = NIODeadline.distantFuture
    /// The one timer of the tunnel: due at its lifetime's end or `idleTimeout` after the last
    /// activity, whichever comes first as of when it was armed. A message does not re-arm it (it
    /// only moves `lastActivity`); the timer re-arms itself when it finds the tunnel still active.
    private var deadlineTimer: RelayTimer?
    /// Records the tunnel for `relay --record DIR` (``TunnelRecorder``); `nil` when not recording.
    var recorder: TunnelRecorder?
    /// The source address whose unjoined-tunnel count includes this tunnel (set by the
    /// ``AdmissionLedger`` when ``RelayConfiguration/maxWaitingTunnelsPerSource`` is on), until
    /// someone claims the joiner side or the tunnel closes.
    var waitingSource: String?
    /// The tunnel counts among the relay's tunnels waiting for their joiner
    /// (``RelayStatisticsBox/claimJoinerRoom(maxConnections:)``) until the joiner side is claimed or
    /// it closes.
    var holdsJoinerRoom = false

    /// Why the tunnel was closed, once it is.
    private(set) var closure: (code: WebSocketCloseCode?, reason: String)?

    /// A QR tunnel (`/cable/new`: the phone creates it) or a linked one (`/cable/contact`: the desktop does).
    let flow: TunnelRecording.Flow

    init(
        tunnelID: [UInt8],
        routingID: [UInt8],
        flow: TunnelRecording.Flow = .qr,
        registry: RelayRegistry,
        eventLoop: EventLoop
    ) {
        self.tunnelID = tunnelID
        self.flow = flow
        self.routingID = routingID
        self.registry = registry
        self.eventLoop = eventLoop
        self.lastActivity = registry.configuration.clock.now()
    }

    /// `side` in close reasons, which both peers read: the device with the relay's word for it
    /// ("the phone (creator)"), so that a desktop's or phone's error line names who did it.
    func name(_ side: TunnelSide) -> String { Self.name(side, flow: flow) }

    /// `side` of a tunnel of `flow` in close reasons: in a QR tunnel the phone creates and the
    /// desktop joins; in a linked one (`/cable/contact`) the other way round.
    static func name(_ side: TunnelSide, flow: TunnelRecording.Flow) -> String {
        let phoneCreates = flow == .qr
        let device = (side == .creator) == phoneCreates ? "phone" : "desktop"
        return "the \(device) (\(side))"
    }

    /// The state of `side`'s slot.
    private subscript(slot side: TunnelSide) -> Slot {
        get { side == .creator ? creatorSlot : joinerSlot }
        set {
            if side == .creator { creatorSlot = newValue } else { joinerSlot = newValue }
        }
    }

    /// Starts the lifetime and idle limits (one timer); call once, right after registering the tunnel.
    func startTimers() {
        lifetimeEnd = configuration.clock.now() + TimeAmount(configuration.tunnelLifetime)
        armDeadline()
    }

    /// Arms the timer for the earlier of the lifetime's end and the idle limit.
    private func armDeadline() {
        let idleEnd = lastActivity + TimeAmount(configuration.idleTimeout)
        let delay = min(lifetimeEnd, idleEnd) - configuration.clock.now()
        deadlineTimer = configuration.clock.scheduleTask(in: delay, on: eventLoop) { [self] in
            self.deadlineReached()
        }
    }

    /// The timer fired: close the tunnel if its lifetime is over (checked first) or it has been idle
    /// for `idleTimeout`, otherwise arm the timer again.
    private func deadlineReached() {
        let now = configuration.clock.now()
        if now >= lifetimeEnd {
            close(code: .goingAway, reason: "tunnel lifetime of \(configuration.tunnelLifetime.humanReadable) expired")
        } else if now >= lastActivity + TimeAmount(configuration.idleTimeout) {
            close(code: .goingAway, reason: "tunnel idle for \(configuration.idleTimeout.humanReadable)")
        } else {
            armDeadline()
        }
    }

    /// Whether the tunnel was closed.
    var isClosed: Bool { closure != nil }

    /// Whether `/cable/connect` may still claim the joiner side.
    var joinerSlotIsFree: Bool {
        if case .empty = joinerSlot { return true }
        return false
    }

    /// Claims the joiner side for an accepted `/cable/connect`.
    func reserveJoiner() {
        joinerSlot = .reserved
        leftWaiting()
    }

    /// The tunnel no longer counts among its creator's unjoined tunnels (nor the relay's).
    func leftWaiting() {
        if holdsJoinerRoom {
            holdsJoinerRoom = false
            registry.statistics.releaseJoinerRoom()
        }
        guard let source = waitingSource else { return }
        waitingSource = nil
        registry.admissionCounts.tunnelLeftWaiting(source: source)
    }

    /// A connection that had claimed `side` closed before its upgrade finished.
    func releaseReservation(_ side: TunnelSide) {
        guard !isClosed, case .reserved = self[slot: side] else { return }
        switch side {
        case .joiner:
            joinerSlot = .empty
            // Waiting again: it needs a joiner's connection again (the leaver's is released with it).
            if !holdsJoinerRoom {
                holdsJoinerRoom = true
                registry.statistics.reclaimJoinerRoom()
            }
            logger.debug("joiner left before its upgrade completed; tunnel open for another join")
        case .creator:
            creatorSlot = .gone
            close(code: .goingAway, reason: "\(name(.creator)) disconnected")
        }
    }

    /// The WebSocket of `side` is up: deliver what waited for it, or close it if the tunnel is gone.
    func attach(_ side: TunnelSide, handler: RelayPeerHandler) {
        if let closure {
            handler.sendClose(code: closure.code, reason: closure.reason)
            return
        }
        self[slot: side] = .attached(handler)
        recorder?.attached(side)
        let pending: CircularBuffer<ByteBuffer>?
        if side == .creator {
            (pending, waitingForCreator) = (waitingForCreator, nil)
        } else {
            (pending, waitingForJoiner) = (waitingForJoiner, nil)
        }
        if let pending {
            logger.debug("delivering \(pending.count) buffered message(s) to \(side)")
            for message in pending {
                registry.recordRelayed(bytes: message.readableBytes)
                handler.deliver(message)
            }
        }
        registry.logLimiter.info(self, "\(side) attached")
        // The other side may have become unwritable while this one was not attached yet.
        if case .attached(let other) = self[slot: side.other], !other.isWritable {
            handler.setPausedForPeer(true)
        }
    }

    /// `side`'s connection became unwritable (its reader is behind) or writable again: stop or
    /// resume reading from the other side, whose messages are what would pile up.
    func writabilityChanged(_ side: TunnelSide, writable: Bool) {
        guard case .attached(let other) = self[slot: side.other] else { return }
        other.setPausedForPeer(!writable)
    }

    /// A binary message arrived from `side`: count it, then forward or buffer it. `inReadBurst`:
    /// `side`'s handler will call ``readBurstEnded(_:)`` once its current read is handled, so the
    /// forwarded message is flushed then (one flush for all the messages of the burst) instead of now.
    func received(_ message: ByteBuffer, from side: TunnelSide, inReadBurst: Bool = false) {
        guard !isClosed else { return }
        let count: Int
        if side == .creator {
            sentByCreator += 1
            count = sentByCreator
        } else {
            sentByJoiner += 1
            count = sentByJoiner
        }
        guard count <= configuration.maxMessagesPerPeer else {
            close(
                code: .policyViolation,
                reason: "more than \(configuration.maxMessagesPerPeer) messages from \(name(side))"
            )
            return
        }
        guard message.readableBytes <= configuration.maxMessageSize else {
            close(code: .messageTooBig, reason: "message larger than \(configuration.maxMessageSize) bytes")
            return
        }
        // Held for a side not yet joined: bounded, and checked before the hooks see the message,
        // so a refused one is neither observed nor recorded.
        switch self[slot: side.other] {
        case .empty, .reserved:
            bytesBeforeJoin += message.readableBytes
            guard bytesBeforeJoin <= configuration.maxBytesBeforeJoin else {
                close(
                    code: .policyViolation,
                    // Within a close reason's 123 bytes; Docs/RELAY.md says why (a caBLE peer sends
                    // at most its 81-byte handshake message before the other side joins).
                    reason: "more than \(configuration.maxBytesBeforeJoin) bytes from \(name(side)) before \(name(side.other)) joined")
                return
            }
        case .attached, .gone:
            break
        }
        lastActivity = configuration.clock.now()
        var payload = message
        if configuration.faultInjector != nil || configuration.messageObserver != nil || recorder != nil {
            payload = observed(payload, from: side)
        }
        let recipient = side.other
        switch self[slot: recipient] {
        case .attached(let handler):
            // Count first: the peer may read the message before this thread gets any further.
            registry.recordRelayed(bytes: payload.readableBytes)
            handler.deliver(payload, flush: !inReadBurst)
        case .empty, .reserved:
            if recipient == .creator {
                waitingForCreator = (waitingForCreator ?? CircularBuffer(initialCapacity: 4))
                waitingForCreator!.append(payload)
            } else {
                waitingForJoiner = (waitingForJoiner ?? CircularBuffer(initialCapacity: 4))
                waitingForJoiner!.append(payload)
            }
            registry.recordBuffered()
        case .gone:
            break
        }
    }

    /// `side`'s handler finished a read burst: flush what it forwarded to the other side.
    func readBurstEnded(_ side: TunnelSide) {
        if case .attached(let recipient) = self[slot: side.other] { recipient.flushDeferred() }
    }

    /// Runs the optional per-message hooks (fault injector, observer, recorder) on `message`; only
    /// called when one is installed, so the plain forwarding path never copies the bytes.
    private func observed(_ message: ByteBuffer, from side: TunnelSide) -> ByteBuffer {
        var bytes = Array(message.readableBytesView)
        configuration.faultInjector?(side.outgoing, &bytes)
        configuration.messageObserver?(side.outgoing, bytes)
        recorder?.message(from: side, bytes)
        if configuration.faultInjector == nil { return message }
        var changed = message
        changed.clear()
        changed.writeBytes(bytes)
        return changed
    }

    /// `side` sent a close frame (already answered by its handler): close the other side alike.
    func peerClosed(_ side: TunnelSide, code: WebSocketCloseCode?, reason: String) {
        self[slot: side] = .gone
        close(code: code, reason: reason)
    }

    /// `side`'s connection ended without a close frame.
    func peerDisconnected(_ side: TunnelSide) {
        self[slot: side] = .gone
        close(code: .goingAway, reason: "\(name(side)) disconnected")
    }

    /// Closes the tunnel: every attached peer gets a close frame with `code` (`nil`: empty close
    /// body, mirroring a peer that sent none), the tunnel leaves the registry and its timers stop.
    func close(code: WebSocketCloseCode?, reason: String) {
        guard !isClosed else { return }
        closure = (code, reason)
        leftWaiting()
        recorder?.finish(code: code, reason: reason)
        deadlineTimer?.cancel()
        (waitingForCreator, waitingForJoiner) = (nil, nil)
        // `reason` may come from a peer's close frame: escaped, and the line is rate-limited.
        registry.logLimiter.info(
            self,
            "tunnel closed: \(code.map { "\($0)" } ?? "no status")\(reason.isEmpty ? "" : ", \(PeerText.loggable(reason))")"
        )
        registry.tunnelClosed(self, code: code)
        for side in [TunnelSide.creator, .joiner] {
            if case .attached(let handler) = self[slot: side] {
                self[slot: side] = .gone
                // Read again, so the peer's answer to the close frame is seen.
                handler.setPausedForPeer(false)
                handler.sendClose(code: code, reason: reason)
            }
        }
    }
}

extension RelayLogLimiter {
    /// ``info(_:_:)`` about `tunnel`: nothing is built (not even the tunnel's logger, whose
    /// metadata costs a log handler's formatting) when the line would not be seen: the relay's log
    /// level hides info lines, or the line is over the budget and debug lines are hidden.
    func info(_ tunnel: RelayTunnel, _ message: @autoclosure () -> String) {
        let level = tunnel.registry.logger.logLevel
        guard level <= .info, !skipsDemoted(at: level) else { return }
        info(tunnel.logger, message())
    }
}
