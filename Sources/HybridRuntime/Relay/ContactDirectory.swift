import CTAP2
import HybridCore
import NIOCore
import NIOHTTP1
import NIOWebSocket

/// The relay's linked-phone side (our stand-in for FCM): phones listening on
/// `/cable/listen/{contact ID}` (each proving it with the `ListenToken` whose hash the ID is), the
/// contact IDs they announced as current or revoked (as revoked tokens), and
/// `/cable/contact/{contact ID}` requests waiting for their phone. Confined to the relay's event loop.
///
/// Answers to `/cable/contact/…` (Docs/LINKING.md):
/// - 400: `X-caBLE-Client-Payload` missing or not the CBOR map `{1: pairing ID, 2: nonce, 3: "ga"|"mc"}`;
/// - 410: the phone revoked the ID (announced on a listen request, even one refused, or by refusing
///   a push), or no phone announced it within ``RelayConfiguration/contactWait`` ("unknown"), for a
///   request that arrived once ``RelayConfiguration/contactGraceAfterStart`` had passed since the
///   relay started (504 for one that arrived before);
/// - 409: the phone is already in a contact transaction with another desktop;
/// - 504: the phone announced the ID on this relay but is not listening now, and did not come back
///   within ``RelayConfiguration/contactWait``;
/// - 503: the tunnel could not be opened: too many open tunnels, or too many connections for its
///   phone to join it (``RelayStatisticsBox/claimJoinerRoom(maxConnections:)``);
/// - 101: the desktop's connection becomes the *creator* of a new tunnel; the phone gets a
///   ``PushMessage`` and joins with `/cable/connect/{routing ID}/{tunnel ID}` like a QR-flow desktop.
final class ContactDirectory {
    private struct Waiter {
        let id: Int
        let promise: EventLoopPromise<UpgradeDecision>
        let payload: [UInt8]
        /// The desktop's connection.
        let requester: any Channel
        var timer: Scheduled<Void>?
    }

    private unowned let registry: RelayRegistry
    private var listeners: [[UInt8]: ListenerHandler] = [:]
    private var known = RecentIDs(capacity: ContactDirectory.maxRemembered)
    private var revoked = RecentIDs(capacity: ContactDirectory.maxRemembered)
    private var waiters: [[UInt8]: [Waiter]] = [:] {
        didSet {
            let count = waiters.values.reduce(0) { $0 + $1.count }
            registry.statistics.update { $0.waitingContacts = count }
        }
    }
    private var nextWaiterID = 0
    /// A contact in progress: the desktop's tunnel and the push its phone was sent.
    private struct Contact {
        let tunnel: RelayTunnel
        /// The encoded ``PushMessage``, sent again to a listener that replaces the one it went to.
        let push: [UInt8]
        /// How many listeners it was sent to.
        var deliveries = 1

        /// Whether the phone has not joined the tunnel (and the desktop is still there).
        var isUnjoined: Bool { !tunnel.isClosed && tunnel.joinerSlotIsFree }
    }
    /// The contact in progress, by contact ID (one desktop at a time per phone).
    private var active: [[UInt8]: Contact] = [:]

    /// Most listeners one push goes to: a phone that listens again before it joined gets it again
    /// (restarted, or its channel dropped while the push was on its way), at most this many times
    /// in all, so a phone that fails on it every time (and restarts) is not sent it forever.
    static let maxDeliveries = 3

    /// Most contact IDs remembered as known, and as revoked; past it the oldest is forgotten, so
    /// that a flood of made-up IDs cannot stop the relay from remembering a real phone.
    static let maxRemembered = RelayContactMemory.capacity

    /// A change not yet handed to the saver is waiting for its timer.
    private var saveScheduled = false

    init(registry: RelayRegistry) {
        self.registry = registry
        if let memory = registry.configuration.contactPersistence?.initial {
            for id in memory.known.suffix(Self.maxRemembered) { known.insert(id) }
            for id in memory.revoked.suffix(Self.maxRemembered) { revoked.insert(id) }
        }
    }

    /// What this directory remembers, oldest first.
    var memory: RelayContactMemory { RelayContactMemory(known: known.ordered, revoked: revoked.ordered) }

    /// The known or revoked IDs, or their order, changed: saved after ``RelayConfiguration/contactSaveDelay``
    /// (a second; the changes meanwhile go in the same save).
    private func remembered() {
        guard let saver = registry.contactSaver, !saveScheduled else { return }
        saveScheduled = true
        registry.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(registry.configuration.contactSaveDelay)) { [self] in
            guard self.saveScheduled else { return }
            self.saveScheduled = false
            saver.submit(self.memory)
        }
    }

    // MARK: - /cable/listen

    /// Validates a listen request; on success the caller upgrades and calls ``attach(_:contactID:)``.
    /// The revocations it announces are recorded even when it is refused.
    func decideListen(contactID: [UInt8], head: HTTPRequestHead) -> UpgradeDecision {
        guard let token = PushChannel.listenToken(headerValues: head.headers[PushChannel.listenTokenHeader]) else {
            return .reject(RelayRejection(
                status: .badRequest,
                reason: "\(PushChannel.listenTokenHeader) missing or not \(ListenToken.size) bytes of unpadded base64url"))
        }
        // Only the phone knows the token; every linked desktop knows the contact ID.
        guard token.contactID == contactID else {
            return .reject(RelayRejection(status: .forbidden, reason: "the listen token is not this contact ID's"))
        }
        guard let announced = PushChannel.revoked(headerValues: head.headers[PushChannel.revokedHeader]) else {
            return .reject(RelayRejection(
                status: .badRequest,
                reason: "\(PushChannel.revokedHeader) is malformed or lists more than \(PushChannel.maxRevoked) tokens"))
        }
        // Recorded even when this listen is refused: a phone sends a revocation to the instance of
        // the revoked ID itself by listening on that ID and naming it revoked (`PhoneListener`).
        recordRevoked(announced)
        if revoked.contains(contactID) {
            return .reject(RelayRejection(
                status: .gone, reason: "contact ID revoked", isRevocationReceipt: announced.contains(contactID)))
        }
        guard listeners.count < registry.configuration.maxListeners || listeners[contactID] != nil else {
            return .reject(RelayRejection(status: .serviceUnavailable, reason: "too many listening phones"))
        }
        let headers = RelayRegistry.selectedSubprotocol
        return .listen(headers, contactID)
    }

    /// Remembers `ids` as revoked (no longer known) and answers the contact requests waiting for them.
    private func recordRevoked(_ ids: [[UInt8]]) {
        // A phone announces its revoked tokens on every listen: when they are the newest revoked
        // IDs already, in this order, nothing changes (and nothing is saved again).
        // (A contact waiting for one of them, or its unjoined push, is still answered below.)
        if revoked.endsWith(ids), !ids.contains(where: { known.contains($0) || active[$0] != nil || waiters[$0] != nil }) { return }
        for id in ids {
            // Saved on every change of the memory, order included (a revocation announced again is
            // the newest again, and the newest are the last a flood of made-up IDs pushes out).
            remembered()
            revoked.insert(id)
            known.remove(id)
            for waiter in take(id) { waiter.promise.succeed(.reject(RelayRejection(status: .gone, reason: "contact ID revoked"))) }
            // A push for it that no phone joined (its phone was frozen or restarted when it
            // unlinked): the desktop hears now that the link is revoked, as from a refusal.
            if let contact = active[id], contact.isUnjoined {
                active[id] = nil
                contact.tunnel.close(code: .contactRevoked, reason: "contact ID revoked by the phone")
            }
        }
    }

    /// A listener's WebSocket is up: it replaces an older listener for the same ID, gets the push
    /// the phone has not joined yet, and contact requests waiting for it are answered.
    func attach(_ handler: ListenerHandler, contactID: [UInt8]) {
        if let old = listeners[contactID], old !== handler {
            old.sendClose(code: .goingAway, reason: PushChannel.replacedReason)
        }
        listeners[contactID] = handler
        // A push the phone has not joined went to a listener that is gone or going (the phone
        // restarted, or its channel dropped and it reconnected): it is sent again on this channel,
        // as FCM delivers again a message its client had not acknowledged, so the desktop still
        // waiting gets its answer, and the phone is not left "busy" with it (409).
        if var contact = active[contactID], contact.isUnjoined {
            if contact.deliveries < Self.maxDeliveries {
                contact.deliveries += 1
                active[contactID] = contact
                handler.deliver(contact.push)
                registry.logLimiter.info(
                    contact.tunnel.logger, "contact for \(Hex.redactedPrefix(contactID)) pushed again: its phone listens again and has not joined")
            } else {
                closeUnjoined(
                    contactID,
                    reason: "the linked phone listened again \(contact.deliveries) times and never joined the tunnel")
            }
        }
        if !known.endsWith([contactID]) {
            remembered()  // new, or the newest again (see ``recordRevoked(_:)``)
            known.insert(contactID)
        }
        registry.logLimiter.info(registry.logger, "phone listening for contact \(Hex.redactedPrefix(contactID))")
        for waiter in take(contactID) {
            // NIO marks a closing channel inactive a loop turn before its close future completes:
            // a desktop that left in that gap must not get a tunnel (nor its phone a push).
            waiter.promise.succeed(
                waiter.requester.isActive ? route(contactID, payload: waiter.payload, to: handler) : Self.desktopLeft)
        }
    }

    /// A listener went away. A push it had not acted on (its tunnel still has no joiner) is given
    /// the contact wait to be joined anyway (a phone whose channel dropped while it joins), then its
    /// tunnel is closed: the desktop is told, and the phone is free for the next desktop.
    func detach(_ handler: ListenerHandler, contactID: [UInt8]) {
        guard listeners[contactID] === handler else { return }
        listeners[contactID] = nil
        guard let contact = active[contactID], contact.isUnjoined else { return }
        let tunnel = contact.tunnel, deliveries = contact.deliveries
        registry.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(registry.configuration.contactWait)) { [self] in
            // Not if the push went to another listener meanwhile: that one's own detach gives it
            // the whole wait.
            guard let now = self.active[contactID], now.tunnel === tunnel, now.deliveries == deliveries,
                self.listeners[contactID] == nil
            else { return }
            self.closeUnjoined(contactID, reason: "the linked phone's push channel closed before it joined the tunnel")
        }
    }

    /// Closes the contact tunnel of `contactID` if no phone has joined it.
    private func closeUnjoined(_ contactID: [UInt8], reason: String) {
        guard let contact = active[contactID], contact.isUnjoined else { return }
        active[contactID] = nil
        contact.tunnel.close(code: .goingAway, reason: reason)
    }

    /// The phone refused a push: close that tunnel with 1008 and its reason, or with 4410 when the
    /// contact ID is revoked (then later contacts for it are answered 410 at once).
    func refused(_ refusal: PushRefusal, contactID: [UInt8]) {
        if refusal.revoked {
            remembered()
            revoked.insert(contactID)
            known.remove(contactID)
        }
        // A refusal of a push the phone has joined meanwhile (it got the push twice and answered
        // one) does not end the transaction.
        guard let contact = active[contactID], contact.tunnel.tunnelID == refusal.tunnelID, contact.isUnjoined else { return }
        let tunnel = contact.tunnel
        if refusal.revoked {
            tunnel.close(code: .contactRevoked, reason: "contact ID revoked by the phone")
        } else {
            tunnel.close(code: .policyViolation, reason: "phone refused: \(refusal.reason)")
        }
    }

    // MARK: - /cable/contact

    /// The answer to a contact request, possibly after waiting for the phone to (re)connect.
    /// `requester` is the desktop's connection: one that closes while its request waits is forgotten
    /// at once (no tunnel is made for it and its phone gets no push it could only answer with a
    /// `/cable/connect` that fails).
    func decideContact(
        contactID: [UInt8], head: HTTPRequestHead, requester: any Channel, afterRead: Bool = false
    ) -> EventLoopFuture<UpgradeDecision> {
        let loop = registry.eventLoop
        let values = head.headers[HybridConstants.clientPayloadHeader]
        // The phone is pushed the payload re-encoded: keys 1-3 only, canonical, whatever the
        // desktop added (other keys are ignored, as Chromium's phone ignores them).
        guard values.count == 1, let bytes = try? Hex.decode(values[0].filter { $0 != " " && $0 != "\t" }),
            let payload = (try? ClientPayload(cbor: bytes))?.cbor
        else {
            return loop.makeSucceededFuture(.reject(RelayRejection(
                status: .badRequest,
                reason: "X-caBLE-Client-Payload missing or not hex of CBOR {1: pairing ID, 2: client nonce, 3: \"ga\"|\"mc\"}")))
        }
        if revoked.contains(contactID) {
            return loop.makeSucceededFuture(.reject(RelayRejection(status: .gone, reason: "contact ID revoked")))
        }
        if let listener = listeners[contactID] {
            guard afterRead else {
                // Routed on the next turn of the loop, after the read that brought the request (the
                // requester's connection is on this loop: the dispatcher sends linked requests
                // here): a desktop that left while the relay did not run, whose request and whose
                // connection's end are read together on waking, is gone by then, and no tunnel is
                // made and no push sent for it.
                let promise = loop.makePromise(of: UpgradeDecision.self)
                loop.assumeIsolated().execute { [self] in
                    guard requester.isActive else {
                        promise.succeed(.reject(RelayRejection(status: .badRequest, reason: "the desktop left before its contact was routed")))
                        return
                    }
                    promise.completeWith(self.decideContact(contactID: contactID, head: head, requester: requester, afterRead: true))
                }
                return promise.futureResult
            }
            return loop.makeSucceededFuture(route(contactID, payload: payload, to: listener))
        }
        // Not listening (yet): a phone reconnecting to a freshly started relay gets a bounded wait.
        let promise = loop.makePromise(of: UpgradeDecision.self)
        nextWaiterID += 1
        let id = nextWaiterID
        var waiter = Waiter(id: id, promise: promise, payload: payload, requester: requester)
        let wait = registry.configuration.contactWait
        // A request that arrives within the grace after the relay started is not told that its
        // contact ID is unknown (judged at arrival, so a grace shorter than the wait still counts).
        let sinceStart = NIODeadline.now() - registry.started
        let withinGrace = sinceStart < TimeAmount(registry.configuration.contactGraceAfterStart)
        waiter.timer = loop.assumeIsolated().scheduleTask(in: TimeAmount(wait)) { [self] in
            guard self.removeWaiter(id, of: contactID) != nil else { return }
            if self.known.contains(contactID) {
                promise.succeed(.reject(RelayRejection(
                    status: .gatewayTimeout,
                    reason: "the linked phone is not listening: no push channel within \(wait.humanReadable)")))
            } else if withinGrace {
                promise.succeed(.reject(RelayRejection(
                    status: .gatewayTimeout,
                    reason: "no phone had listened for this contact ID when the request came, \(sinceStart.nanoseconds / 1_000_000_000) s after the relay started (one that listened before may not be back yet)")))
            } else {
                promise.succeed(.reject(RelayRejection(status: .gone, reason: "contact ID unknown")))
            }
        }
        waiters[contactID, default: []].append(waiter)
        // A desktop that leaves is forgotten at once, so a gone one holds nothing for the whole wait.
        requester.closeFuture.hop(to: loop).assumeIsolated().whenComplete { [self] _ in
            guard let gone = self.removeWaiter(id, of: contactID) else { return }
            gone.timer?.cancel()
            gone.promise.succeed(Self.desktopLeft)
        }
        return promise.futureResult
    }

    /// The answer to a contact whose desktop left (nobody reads it).
    private static let desktopLeft = UpgradeDecision.reject(RelayRejection(status: .gone, reason: "the desktop left"))

    /// Removes one waiting contact request, if it is still waiting.
    private func removeWaiter(_ id: Int, of contactID: [UInt8]) -> Waiter? {
        guard let index = waiters[contactID]?.firstIndex(where: { $0.id == id }) else { return nil }
        let waiter = waiters[contactID]?.remove(at: index)
        if waiters[contactID]?.isEmpty == true { waiters[contactID] = nil }
        return waiter
    }

    /// Opens a tunnel for the desktop (creator side) and pushes its IDs to the phone.
    private func route(_ contactID: [UInt8], payload: [UInt8], to listener: ListenerHandler) -> UpgradeDecision {
        if let busy = active[contactID], !busy.tunnel.isClosed {
            return .reject(RelayRejection(status: .conflict, reason: "the linked phone is busy with another desktop's contact request"))
        }
        // A push channel whose phone does not read would hold every push in the relay's memory:
        // it is closed, and the desktop hears that the phone is not listening.
        guard listener.isReading else {
            listener.sendClose(code: .policyViolation, reason: "the phone does not read its push messages")
            return .reject(RelayRejection(status: .gatewayTimeout, reason: "the linked phone is not listening: its push channel does not read"))
        }
        var generator = SystemRandomNumberGenerator()
        let tunnelID = (0..<HybridConstants.tunnelIDSize).map { _ in UInt8.random(in: 0...255, using: &generator) }
        switch registry.openTunnel(tunnelID: tunnelID, flow: .linked) {
        case .reject(let rejection):
            return .reject(rejection)
        case .listen:
            preconditionFailure("openTunnel never answers listen")
        case .accept(let headers, let tunnel, let side):
            let push = PushMessage(tunnelID: tunnelID, routingID: tunnel.routingID, clientPayload: payload).encoded
            active[contactID] = Contact(tunnel: tunnel, push: push)
            listener.deliver(push)
            registry.logLimiter.info(tunnel.logger, "contact for \(Hex.redactedPrefix(contactID)) pushed to its phone")
            return .accept(headers, tunnel, side)
        }
    }

    /// Whether `tunnel` was opened by a desktop's contact request (the linked flow, where the
    /// desktop is the tunnel's creator and the phone its joiner).
    func isContactTunnel(_ tunnel: RelayTunnel) -> Bool {
        active.values.contains { $0.tunnel === tunnel }
    }

    /// A tunnel closed: forget it as a contact in progress.
    func tunnelClosed(_ tunnel: RelayTunnel) {
        for (id, candidate) in active where candidate.tunnel === tunnel { active[id] = nil }
    }

    private func take(_ contactID: [UInt8]) -> [Waiter] {
        let list = waiters.removeValue(forKey: contactID) ?? []
        for waiter in list { waiter.timer?.cancel() }
        return list
    }

    /// Relay shutdown: answer every waiting contact request 503 and close the listeners.
    func shutdown() {
        for id in Array(waiters.keys) {
            for waiter in take(id) {
                waiter.promise.succeed(.reject(RelayRejection(status: .serviceUnavailable, reason: "relay shutting down")))
            }
        }
        for listener in listeners.values { listener.sendClose(code: .goingAway, reason: "relay shutting down") }
        listeners = [:]
        // Handed to the saver at every shutdown (the relay waits for it): a change still waiting for
        // its timer, a memory whose last save failed (the disk may have room again), and one whose
        // file was removed or replaced since; the saver writes nothing when the place holds it already.
        if let saver = registry.contactSaver {
            saveScheduled = false
            saver.submit(memory)
        }
    }
}

/// A contact request's decision travels in an `EventLoopFuture` (it may wait for the phone). It is
/// made, completed and consumed on the relay's one event loop, like the tunnel it may carry, so no
/// other thread ever sees it.
extension UpgradeDecision: @unchecked Sendable {}
