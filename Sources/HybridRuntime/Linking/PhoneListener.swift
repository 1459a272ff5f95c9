import CTAP2
import HybridCore
import NIOCore
import Logging

/// Keeps a linked phone reachable: holds its push channel (`/cable/listen/{contact ID}`, proven with
/// its `ListenToken`) open on the relay, reconnecting with exponential backoff when it drops (a
/// desktop's embedded relay lives only as long as that desktop run), and hands every push to a
/// handler, one at a time.
///
/// Each (re)connection announces the revoked contact IDs (as their tokens), so even a freshly
/// started relay answers 410 for them; each is also sent to its own contact ID until a relay answered
/// it (`sendRevocations`, beside the push channel), for a relay behind a proxy that routes by contact ID. A
/// 410 on the listen request itself (the contact ID is revoked) ends the loop, and so does a token the
/// phone revoked while it listens (``Configuration/isCurrent``).
public enum PhoneListener {
    /// Where and how to listen.
    public struct Configuration: Sendable {
        /// The relay, `ws://HOST:PORT`.
        public var relayURL: String
        /// The phone's current listen token (its contact ID is the token's hash).
        public var listenToken: ListenToken
        /// Tokens of the contact IDs the phone revoked (at most ``PushChannel/maxRevoked`` are announced).
        public var revoked: [ListenToken]
        /// First pause after a failed or dropped connection; doubled up to ``maxBackoff``. Default 100 ms.
        public var initialBackoff: Duration = .milliseconds(100)
        /// Longest pause between reconnection attempts. Default 1 s (below the relay's contact wait of 3 s).
        public var maxBackoff: Duration = .seconds(1)
        /// Limit of one connection attempt. Default 5 s.
        public var connectTimeout: Duration = .seconds(5)
        /// How long a push channel must stay open to count as back: one that drops sooner (a
        /// proxy or relay that accepts and then closes at once) keeps the backoff growing, and is
        /// reported once, not at every attempt; the open is reported when it has stayed up this
        /// long. Default 5 s.
        public var stableAfter: Duration = .seconds(5)
        /// Whether ``listenToken`` is still the phone's, asked before each connection attempt and
        /// each wait for a push (at least every 250 ms while the channel is idle; never while a
        /// push is handled). `false`: the phone revoked it meanwhile (`phone --unlink` in another
        /// process), so ``PhoneListener/run(_:count:limit:start:logger:events:handle:)`` closes its
        /// channel and throws ``PhoneListener/ContactRevoked``, and the caller listens again under
        /// the new token, announcing this one as revoked. `nil`: never asked.
        public var isCurrent: (@Sendable () -> Bool)?
        /// A push channel the relay has sent nothing on for this long gets a ping; default 30 s.
        public var keepaliveAfter: Duration = .seconds(30)
        /// A channel still silent this long after its ping is taken as lost (a connection a NAT or a
        /// proxy dropped without closing it, which would otherwise leave the phone deaf for good)
        /// and opened again; default 10 s. The channels after such a loss are pinged at once and
        /// count as back (``Event/listening(relayURL:)``) only once the relay is heard on one.
        public var keepaliveAnswer: Duration = .seconds(10)

        /// Listen at `relayURL` for the contact ID of `listenToken`.
        public init(relayURL: String, listenToken: ListenToken, revoked: [ListenToken] = []) {
            self.relayURL = relayURL
            self.listenToken = listenToken
            self.revoked = revoked
        }

        /// The contact ID listened for.
        public var contactID: [UInt8] { listenToken.contactID }
    }

    /// What the listener reports while it runs.
    public enum Event: Sendable {
        /// The push channel is open (after a channel went silent: and the relay was heard on it).
        case listening(relayURL: String)
        /// The push channel dropped or could not be opened (`cause` says which way); the next
        /// attempt follows after `retryIn`.
        case unreachable(reason: String, retryIn: Duration, cause: Outage)
        /// A push arrived.
        case pushed(PushMessage)
        /// A malformed push was ignored.
        case ignored(reason: String)
    }

    /// Why the push channel is not open, as an ``Event/unreachable(reason:retryIn:cause:)`` tells it.
    /// Every cause is tried again with backoff.
    public enum Outage: String, Sendable, CaseIterable {
        /// No connection: refused, no route, or the TCP connect timed out.
        case unreachable
        /// The relay took the TCP connection and did not answer the upgrade: nothing within
        /// ``Configuration/connectTimeout`` (a relay that hangs, a port that accepts and says
        /// nothing), or the connection closed before an answer (a proxy with no backend).
        case unanswered
        /// The relay answered the upgrade, but not as a tunnel service does (not HTTP, a 101
        /// without `fido.cable`, a malformed header): ``RuntimeError/Code/handshakeFailed``.
        case broken
        /// The relay refused the channel for now: 408, 429 or a 5xx (any other refusal ends the listener).
        case refused
        /// An open push channel dropped.
        case lost

        /// The outage a failed ``WebSocketTunnel/open(url:timeout:options:group:logger:)`` means.
        init(opening error: any Error) {
            guard let error = error as? RuntimeError else {
                self = .unreachable
                return
            }
            if error.unansweredUpgrade {
                self = .unanswered
                return
            }
            switch error.code {
            case .upgradeRejected: self = .refused
            case .handshakeFailed: self = .broken
            default: self = .unreachable
            }
        }
    }

    /// How the handler dealt with a push.
    public enum Verdict: Sendable {
        /// The transaction completed.
        case answered
        /// The phone will not answer (replayed payload, unknown pairing ID, …): the relay closes the
        /// desktop's tunnel with 1008 and `phone refused: <reason>`.
        case refused(String)
        /// The transaction was attempted and failed.
        case failed(String)
        /// The contact ID the push came for was revoked meanwhile (`phone --unlink` while listening):
        /// the refusal tells the relay (which closes the desktop's tunnel with 4410 and answers later
        /// contacts with 410), and ``run(_:count:limit:start:logger:events:handle:)`` throws
        /// ``ContactRevoked`` so the caller can listen again under its new contact ID.
        case revoked
    }

    /// Thrown by ``run(_:count:limit:start:logger:events:handle:)`` after a ``Verdict/revoked`` push,
    /// or when ``Configuration/isCurrent`` says the listen token was revoked.
    public struct ContactRevoked: Error, Sendable {
        /// Pushes answered before the revoked one.
        public var answered: Int
    }

    /// Thrown by ``run(_:count:limit:start:logger:events:handle:)`` when the relay closed the push
    /// channel because a newer listener for the same contact ID replaced it (1001,
    /// ``PushChannel/replacedReason``): another process listens for this phone, and taking the ID
    /// back would knock that one off in turn.
    public struct Replaced: Error, Sendable, CustomStringConvertible {
        /// Pushes answered before.
        public var answered: Int

        /// What happened, for people.
        public var description: String {
            "another listener took over this contact ID on the relay (a second `phone --listen` on the same link store?); this one stops"
        }
    }

    /// Listens until `count` pushes were answered (`nil`: until `limit` or cancellation). The limit
    /// runs from `start` (a caller that listens again, after a revoked contact ID, passes the first
    /// start, so the limit stays the one the user gave and the timeout says so).
    ///
    /// - Returns: the number of answered pushes.
    /// - Throws: ``RuntimeError`` `.timeout` when `limit` passes before `count` answers,
    ///   `.upgradeRejected` (410) when the relay says the contact ID is revoked; ``Replaced`` when a
    ///   newer listener for the same contact ID replaced this one; ``ContactRevoked`` after a
    ///   ``Verdict/revoked`` push or when ``Configuration/isCurrent`` returns `false`.
    @discardableResult
    public static func run(
        _ configuration: Configuration, count: Int?, limit: Duration?, start: ContinuousClock.Instant = .now,
        logger: Logger = Logger(label: "hybrid-sim.phone"),
        events: @escaping @Sendable (Event) -> Void = { _ in },
        handle: @escaping @Sendable (PushMessage) async -> Verdict
    ) async throws -> Int {
        let deadline = limit.map { start + $0 }
        func remaining() -> Duration { deadline.map { $0 - ContinuousClock.now } ?? .seconds(3600) }
        var options = WebSocketTunnel.Options()
        options.extraHeaders = [(PushChannel.listenTokenHeader, configuration.listenToken.base64URL)]
        let revoked = configuration.revoked.suffix(PushChannel.maxRevoked).map(\.base64URL)
        if !revoked.isEmpty { options.extraHeaders.append((PushChannel.revokedHeader, revoked.joined(separator: ","))) }
        let url = configuration.relayURL + TunnelServicePath.listenPath(contactID: configuration.contactID)
        var answered = 0
        // Revocations still to send to their own contact IDs, newest first (see `sendRevocations`);
        // what a run of it could not deliver is tried again after the next reconnection.
        var unsent = Array(configuration.revoked.suffix(PushChannel.maxRevoked).reversed())
        var sending: Task<[ListenToken], Never>?
        defer { sending?.cancel() }
        var backoff = configuration.initialBackoff
        // The last channel dropped before it had stayed open ``Configuration/stableAfter``.
        var flapping = false
        // The last channel went silent (the keepalive's ping unanswered): a relay or proxy that
        // takes the channel and then drops everything would be "listening" again at every open.
        // The next channel is pinged at once and counts as back only when the relay is heard on it.
        var unproven = false
        while count.map({ answered < $0 }) ?? true {
            try Task.checkCancellation()
            if configuration.isCurrent?() == false { throw ContactRevoked(answered: answered) }
            guard remaining() > .zero else { throw RuntimeError.timeout("listening for contact requests", after: limit ?? .zero) }
            let channel: WebSocketTunnel
            do {
                channel = try await WebSocketTunnel.open(
                    url: url, timeout: min(configuration.connectTimeout, remaining()), options: options, logger: logger)
            } catch let error as RuntimeError
                where (error.code == .upgradeRejected && !Self.isPassing(error.httpStatus)) || error.code == .invalidAddress
            {
                // An answer retrying will not change, or an address that is not one.
                throw error
            } catch {
                let pause = min(backoff, max(remaining(), .zero))
                events(.unreachable(reason: "\(error)", retryIn: pause, cause: Outage(opening: error)))
                try await Task.sleep(for: pause)
                backoff = min(backoff * 2, configuration.maxBackoff)
                continue
            }
            // The channel counts as back (reported, the backoff reset) at once, unless the channels
            // before dropped right after opening: then once this one has stayed up
            // ``Configuration/stableAfter`` or brought a push the phone answered.
            let opened = ContinuousClock.now
            func back() {
                flapping = false
                unproven = false
                backoff = configuration.initialBackoff
                events(.listening(relayURL: configuration.relayURL))
            }
            if !flapping { back() }
            if let previous = sending {
                unsent = await previous.value
                sending = nil
            }
            if !unsent.isEmpty {
                // Beside the push channel, so that pushes are answered meanwhile.
                let tokens = unsent, relayURL = configuration.relayURL
                sending = Task { await sendRevocations(tokens, relayURL: relayURL, within: .seconds(2), logger: logger) }
            }
            /// Reports a channel that dropped (or went silent) and waits before the next attempt.
            func lost(_ error: any Error) async throws {
                // A channel that dropped soon after it opened is a relay or proxy that accepts
                // and then closes: the backoff grows as for a refused connection, and the drop is
                // reported for the first such channel only (not two lines every 100 ms).
                let lived = ContinuousClock.now - opened
                let pause: Duration
                if lived < configuration.stableAfter || unproven {
                    pause = min(backoff, max(remaining(), .zero))
                    if !flapping {
                        events(.unreachable(
                            reason: "\(error) (\(lived.humanReadable) after the push channel opened; reconnecting with backoff, "
                                + "reported again once a channel stays open \(configuration.stableAfter.humanReadable))",
                            retryIn: pause, cause: .lost))
                    }
                    flapping = true
                    backoff = min(backoff * 2, configuration.maxBackoff)
                } else {
                    // It had stayed up: whatever came before, this is a new outage.
                    flapping = false
                    backoff = configuration.initialBackoff
                    pause = configuration.initialBackoff
                    events(.unreachable(reason: "\(error)", retryIn: pause, cause: .lost))
                }
                try await Task.sleep(for: pause)
            }
            // When the keepalive ping went out (NIO's clock, as the last-heard time), while no
            // answer has come; and when the keepalive was last looked at.
            var pingSent: NIODeadline?
            var lastCheck = NIODeadline.now()
            if unproven {
                pingSent = lastCheck
                try? await channel.ping()
            }
            while count.map({ answered < $0 }) ?? true {
                if configuration.isCurrent?() == false {
                    await refuseUnread(on: channel, events: events)
                    await channel.close()
                    throw ContactRevoked(answered: answered)
                }
                if flapping, !unproven, ContinuousClock.now - opened >= configuration.stableAfter { back() }
                let message: [UInt8]
                do {
                    // Short slices, so cancelling the task stops the listener promptly.
                    message = try await channel.receive(timeout: min(remaining(), .milliseconds(250)))
                } catch let error as RuntimeError where error.code == .timeout {
                    if Task.isCancelled {
                        await channel.close()
                        throw CancellationError()
                    }
                    guard remaining() > .zero else {
                        await channel.close()
                        throw RuntimeError.timeout("listening for contact requests", after: limit ?? .zero)
                    }
                    let now = NIODeadline.now()
                    defer { lastCheck = now }
                    if let sent = pingSent, channel.lastHeard > sent {
                        pingSent = nil  // heard since the ping: alive
                        if unproven { back() }
                    }
                    if pingSent != nil, now - lastCheck > .seconds(1) {
                        // This process did not run for a while (frozen, starved): the answer may be
                        // in the socket unread. Ask again rather than judge.
                        pingSent = nil
                    }
                    guard let sent = pingSent else {
                        if channel.silence >= configuration.keepaliveAfter {
                            pingSent = now
                            try? await channel.ping()
                        }
                        continue
                    }
                    if now - sent < TimeAmount(configuration.keepaliveAnswer) { continue }
                    let silence = channel.silence
                    // Gone without a word: no close handshake to wait for.
                    await channel.abort()
                    try await lost(RuntimeError(
                        .timeout,
                        "the push channel went silent: nothing from the relay for \(silence.humanReadable), not even the answer to a ping "
                            + "(a connection a NAT or proxy dropped without closing it?); reconnecting, and reported "
                            + "listening again once the relay answers on a new channel"))
                    // Reported once: the channels after it stay unreported until one is heard.
                    flapping = true
                    unproven = true
                    break
                } catch let error as RuntimeError where Self.isReplacement(error) {
                    // Another listener holds this contact ID now (the same store listened twice):
                    // taking it back would knock that one off in turn, over and over.
                    throw Replaced(answered: answered)
                } catch {
                    try await lost(error)
                    break
                }
                // Pushes that waited in this channel while the phone did not read (a process frozen,
                // a long transaction) after a newer listener replaced it: the relay sent the ones
                // nobody joined to that listener, which may have answered them already.
                if let ended = channel.endedWith, Self.isReplacement(ended) { throw Replaced(answered: answered) }
                let push: PushMessage
                do {
                    push = try PushMessage(bytes: message)
                } catch {
                    events(.ignored(reason: "\(error)"))
                    continue
                }
                events(.pushed(push))
                switch await handle(push) {
                case .answered:
                    answered += 1
                    // A channel that brought a push the phone answered works (a relay that sends one
                    // push and closes does not reset the backoff).
                    if flapping { back() }
                case .refused(let reason):
                    try? await channel.send(PushRefusal(tunnelID: push.tunnelID, reason: reason).encoded)
                case .failed:
                    break
                case .revoked:
                    try? await channel.send(
                        PushRefusal(tunnelID: push.tunnelID, reason: "contact ID revoked", revoked: true).encoded)
                    await channel.close()
                    throw ContactRevoked(answered: answered)
                }
            }
            await channel.close()
        }
        return answered
    }

    /// Refuses, as revoked, the pushes already on their way for a token the phone has just revoked
    /// (a phone frozen while `phone --unlink` ran finds them when it wakes): the relay closes those
    /// desktops' tunnels with 4410, and they remove the link, instead of waiting out their timeout.
    /// Reads for at most 200 ms.
    private static func refuseUnread(on channel: WebSocketTunnel, events: @Sendable (Event) -> Void) async {
        let end = ContinuousClock.now + .milliseconds(200)
        while ContinuousClock.now < end {
            guard let message = try? await channel.receive(timeout: end - ContinuousClock.now) else { return }
            guard let push = try? PushMessage(bytes: message) else { continue }
            events(.ignored(reason: "a contact for the contact ID just revoked: refused as revoked (its desktop removes the link)"))
            try? await channel.send(PushRefusal(tunnelID: push.tunnelID, reason: "contact ID revoked", revoked: true).encoded)
        }
    }

    /// Whether `error` is the relay's close of a listener that a newer one replaced.
    static func isReplacement(_ error: RuntimeError) -> Bool {
        error.closeCode == .goingAway && error.reason.hasSuffix(PushChannel.replacedReason)
    }

    /// Whether a refused listen request is tried again with backoff: 408 and 429 (timeout, too many
    /// requests) and 5xx (a proxy's 502 while a relay instance restarts, a relay shutting down)
    /// pass; any other answer (400, 403 the token, 404, 410 revoked, 401 from a proxy, …) will not
    /// change by retrying and ends the listener.
    static func isPassing(_ status: Int?) -> Bool {
        guard let status else { return true }
        return status == 408 || status == 429 || status >= 500
    }

    /// Sends each revocation to the relay instance of the revoked contact ID. The listen request
    /// announces every revoked token, but behind a proxy that routes by contact ID
    /// (`Scripts/relay-cluster`) it reaches only the current ID's instance. A listen request on the
    /// revoked ID itself, proven with its token and naming it revoked, is routed to that ID's
    /// instance, which records the revocation and answers 410. `tokens` go in order (newest first),
    /// each open bounded by 1 s and all by `within`, until cancelled.
    ///
    /// - Returns: the tokens not delivered: no answer, or one other than 410 (or 101, from a relay
    ///   that takes such a listen and so knows nothing of revocations: there is nothing to retry;
    ///   with `acceptedIsDelivered` false such a token is returned too, for a caller that reports
    ///   whether the relay now answers 410).
    package static func sendRevocations(
        _ tokens: [ListenToken], relayURL: String, within: Duration, acceptedIsDelivered: Bool = true, logger: Logger
    ) async -> [ListenToken] {
        let deadline = ContinuousClock.now + within
        var unsent: [ListenToken] = []
        for (index, token) in tokens.enumerated() {
            let left = deadline - ContinuousClock.now
            guard left > .zero, !Task.isCancelled else { return unsent + tokens[index...] }
            var options = WebSocketTunnel.Options()
            options.extraHeaders = [(PushChannel.listenTokenHeader, token.base64URL), (PushChannel.revokedHeader, token.base64URL)]
            let url = relayURL + TunnelServicePath.listenPath(contactID: token.contactID)
            do {
                // A relay that does not know revocations takes the listen: nothing to listen for there.
                let accepted = try await WebSocketTunnel.open(url: url, timeout: min(left, .seconds(1)), options: options, logger: logger)
                await accepted.close()
                if !acceptedIsDelivered { unsent.append(token) }
            } catch let error as RuntimeError where error.code == .upgradeRejected && error.httpStatus == 410 {
                continue
            } catch {
                unsent.append(token)
            }
        }
        return unsent
    }
}
