import CTAP2
import NIOCore
import NIOWebSocket

/// Applies ``RelayFaults`` to the messages one peer sends: sits in that peer's pipeline between the
/// frame aggregator and the ``RelayFrameFeed`` of its ``RelayPeerHandler``, so the tunnel (its counters, the message observer,
/// `--record`) sees exactly what the faults let through, as the other peer receives it.
///
/// Every decision is ``RelayFaults/decide(seed:recipient:number:length:)``; this handler only
/// carries it out: drops, rewrites, duplicates, holds (delay: in order, later messages queue behind;
/// reorder: until the next message has gone, at most the hold) or closes the tunnel. Control frames
/// (close, ping) wait behind held messages too, so a peer's close never overtakes its last message.
/// Each fault is logged at info level through the relay's log budget (so a flood is demoted to debug).
/// Runs on the relay's event loop.
final class FaultInjectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame

    private let faults: RelayFaults
    private let seed: UInt64
    private let recipient: FaultRecipient
    private let tunnel: RelayTunnel
    private let logLimiter: RelayLogLimiter
    private var context: ChannelHandlerContext?
    /// Messages seen so far in this direction.
    private var count = 0
    /// Frames waiting for their release time (delay), in order.
    private var queue = CircularBuffer<(frame: WebSocketFrame, due: NIODeadline)>()
    private var queueTimer: Scheduled<Void>?
    /// The message held back by `reorder` and its number.
    private var held: (frame: WebSocketFrame, number: Int)?
    private var heldTimer: Scheduled<Void>?

    init(faults: RelayFaults, seed: UInt64, recipient: FaultRecipient, tunnel: RelayTunnel, logLimiter: RelayLogLimiter) {
        self.faults = faults
        self.seed = seed
        self.recipient = recipient
        self.tunnel = tunnel
        self.logLimiter = logLimiter
    }

    /// Puts a fault handler for `side` of `tunnel` in front of `peerHandler` when the relay has fault
    /// rules; does nothing otherwise. The one call in the relay's forwarding path.
    static func install(
        on channel: Channel, before peerHandler: any ChannelHandler, tunnel: RelayTunnel, side: TunnelSide,
        registry: RelayRegistry
    ) throws {
        let faults = registry.configuration.faults
        guard faults.isEnabled else { return }
        // QR flow: the phone created the tunnel (/cable/new); linked flow: the desktop did (/cable/contact).
        // Contact tunnels live on the directory's shard only; the others never make a directory.
        let phoneCreated = registry.shardIndex != RelayShards.directoryShard || !registry.directory.isContactTunnel(tunnel)
        let sender: FaultRecipient = (side == .creator) == phoneCreated ? .phone : .desktop
        let recipient: FaultRecipient = sender == .phone ? .desktop : .phone
        let seed = faults.seed(forTunnel: tunnel.tunnelID)
        if side == .creator {
            registry.logLimiter.info(
                tunnel.logger,
                "fault injection on this tunnel (seed \(seed)): \(faults.rules.map(\.description).joined(separator: " "))")
        }
        let handler = FaultInjectionHandler(
            faults: faults, seed: seed, recipient: recipient, tunnel: tunnel, logLimiter: registry.logLimiter)
        try channel.pipeline.syncOperations.addHandler(handler, position: .before(peerHandler))
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        queueTimer?.cancel()
        heldTimer?.cancel()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard frame.opcode == .binary, !tunnel.isClosed else {
            releaseHeld()
            emit(frame, delay: nil)
            return
        }
        count += 1
        let number = count
        let message = Array(frame.unmaskedData.readableBytesView)
        let decision = faults.decide(seed: seed, recipient: recipient, number: number, length: message.count)
        guard !decision.isEmpty else {
            emit(frame, delay: nil)
            releaseHeld()
            return
        }
        let what = "message \(number) to the \(recipient) (\(message.count) bytes)"
        if let code = decision.closeCode {
            log("close \(code) instead of \(what)")
            held = nil
            tunnel.close(code: WebSocketCloseCode(rawValue: code), reason: "fault injection: close")
            return
        }
        if decision.drop {
            log("drop of \(what)")
            return
        }
        var out = frame
        if decision.truncatedLength != nil || !decision.corruptions.isEmpty {
            let bytes = decision.transform(message)
            out = WebSocketFrame(fin: true, opcode: .binary, data: context.channel.allocator.buffer(bytes: bytes))
            if let kept = decision.truncatedLength { log("truncate of \(what) to \(min(kept, message.count)) bytes") }
            for corruption in decision.corruptions {
                log("corrupt \(what): byte \(corruption.offset) XOR 0x\(Hex.encode([corruption.mask]))")
            }
        }
        if let delay = decision.delay { log("delay of \(what) by \(RelayFault.format(delay))") }
        if decision.duplicate { log("duplicate of \(what)") }
        if let limit = decision.reorderHold, held == nil {
            log("reorder: \(what) held until the next message (at most \(RelayFault.format(limit)))")
            hold(out, number: number, for: limit)
            return
        }
        emit(out, delay: decision.delay)
        if decision.duplicate { emit(out, delay: nil) }
        releaseHeld()
    }

    // MARK: - Holding and releasing

    private func log(_ text: String) {
        logLimiter.info(tunnel.logger, "fault: \(text)")
    }

    /// Holds a reordered message until the next one passes or `limit` runs out.
    private func hold(_ frame: WebSocketFrame, number: Int, for limit: Duration) {
        held = (frame, number)
        guard let context else { return }
        heldTimer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(limit)) { [self] in
            guard held != nil else { return }
            log("reorder: nothing overtook message \(number) to the \(recipient); forwarded after the hold")
            releaseHeld()
        }
    }

    /// Forwards the held message (after whatever was just forwarded).
    private func releaseHeld() {
        guard let (frame, _) = held else { return }
        held = nil
        heldTimer?.cancel()
        heldTimer = nil
        emit(frame, delay: nil)
    }

    /// Passes `frame` on after `delay`, never before a frame queued earlier.
    private func emit(_ frame: WebSocketFrame, delay: Duration?) {
        guard let context else { return }
        let now = NIODeadline.now()
        let due = max(now + TimeAmount(delay ?? .zero), queue.last?.due ?? now)
        if queue.isEmpty, due <= now {
            context.fireChannelRead(wrapInboundOut(frame))
            return
        }
        queue.append((frame, due))
        if queue.count == 1 { scheduleQueue() }
    }

    private func scheduleQueue() {
        guard let context, let first = queue.first else { return }
        queueTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: first.due) { [self] in
            self.drainQueue()
        }
    }

    private func drainQueue() {
        guard let context else { return }
        let now = NIODeadline.now()
        while let first = queue.first, first.due <= now {
            queue.removeFirst()
            context.fireChannelRead(wrapInboundOut(first.frame))
        }
        scheduleQueue()
    }
}
