import NIOCore

/// Deadlines of one fixed duration, in the order they were added, which is the order they fall due:
/// a first-in-first-out queue, not a heap. An item that settles (a connection that upgraded, was
/// handed over or closed) is not taken out then; its owner skips it when it falls due, or drops it
/// sooner once it is the oldest (``dropSettled(_:)``), so settling costs nothing.
///
/// Used by the relay's shards (``DeadlineQueue``, with an event-loop timer) and by
/// ``RelayDispatcher``'s thread, which waits for the oldest deadline itself.
struct DeadlineFIFO<Item> {
    private var entries = CircularBuffer<(deadline: NIODeadline, item: Item)>()

    /// Items held (including ones that settled since).
    var count: Int { entries.count }

    /// The oldest item's deadline, the next to fall due.
    var nextDeadline: NIODeadline? { entries.first?.deadline }

    /// Adds `item`, due at `deadline` (not earlier than any deadline added before).
    mutating func append(_ item: Item, deadline: NIODeadline) {
        entries.append((deadline, item))
    }

    /// Removes the oldest items for as long as `settled` says they no longer need their deadline, so
    /// the queue holds about as many items as are still unsettled rather than every item of the last
    /// duration's length.
    mutating func dropSettled(_ settled: (Item) -> Bool) {
        while let first = entries.first, settled(first.item) {
            entries.removeFirst()
        }
    }

    /// Removes and returns every item due at `now`, oldest first.
    mutating func popDue(at now: NIODeadline) -> [Item] {
        var due: [Item] = []
        while let first = entries.first, first.deadline <= now {
            entries.removeFirst()
            due.append(first.item)
        }
        return due
    }

    /// Forgets every item.
    mutating func removeAll() {
        entries.removeAll()
    }
}

/// A ``DeadlineFIFO`` on a shard's event loop with one timer, instead of a NIO timer per item: a
/// shard's upgrade timeouts (``RelayConfiguration/upgradeTimeout``) and its closing handshakes
/// (``RelayConfiguration/closeHandshakeTimeout``). Nothing is cancelled when an item settles,
/// whereas cancelling a NIO timer (`Scheduled.cancel`) searches the loop's whole timer heap, which
/// holds a timer per open tunnel: at 9,000 tunnels that search was a few percent of the relay's cost
/// of opening a tunnel, and of closing one (Docs/BENCHMARKS.md).
///
/// The timer runs when the oldest deadline falls due, but at most once per ``granularity``, so an
/// item is handled between its deadline and one granularity (a twentieth of the duration, at most
/// 100 ms) after it. Confined to the shard's event loop; deadlines are read on the loop's clock.
struct DeadlineQueue<Item> {
    private var fifo = DeadlineFIFO<Item>()
    private var timer: Scheduled<Void>?
    /// The most an item may be handled after its deadline.
    let granularity: TimeAmount

    init(duration: Duration) {
        granularity = min(TimeAmount(duration / 20), .milliseconds(100))
    }

    /// Items in the queue (including ones that settled since).
    var count: Int { fifo.count }

    /// Adds `item`, due at `deadline` (not earlier than any deadline added before); `arm` schedules
    /// the timer when none is pending.
    mutating func add(_ item: Item, deadline: NIODeadline, arm: (NIODeadline) -> Scheduled<Void>) {
        fifo.append(item, deadline: deadline)
        if timer == nil { timer = arm(deadline) }
    }

    /// See ``DeadlineFIFO/dropSettled(_:)``.
    mutating func dropSettled(_ settled: (Item) -> Bool) {
        fifo.dropSettled(settled)
    }

    /// The timer fired at `now`: removes every item due and returns them (the caller acts on those
    /// not settled), and when items remain re-arms the timer for the oldest, no sooner than one
    /// granularity from now.
    mutating func due(at now: NIODeadline, arm: (NIODeadline) -> Scheduled<Void>) -> [Item] {
        timer = nil
        let due = fifo.popDue(at: now)
        if let next = fifo.nextDeadline {
            timer = arm(max(next, now + granularity))
        }
        return due
    }

    /// Stops the timer and forgets every item.
    mutating func stop() {
        timer?.cancel()
        timer = nil
        fifo.removeAll()
    }
}

/// A connection waiting for its upgrade, in a shard's ``DeadlineQueue``.
struct UpgradeWaiter {
    var connection: ObjectIdentifier
    /// Tells this connection from a later one at the same address (``RelayConnection/serial``).
    var serial: UInt64
}

extension RelayRegistry {
    /// Starts `connection`'s upgrade timeout: it is closed if it has sent nothing by then, answered
    /// `408` if its request had begun and not ended; one whose whole request is being decided (a
    /// contact request waiting for its phone) is left to its decision.
    func startUpgradeTimeout(of connection: RelayConnection) {
        // The loop's own clock: an EmbeddedEventLoop's (the fuzz probe's, tests') is virtual.
        let deadline = eventLoop.now + TimeAmount(configuration.upgradeTimeout)
        upgradeDeadlines.dropSettled { !isAwaitingUpgrade($0) }
        upgradeDeadlines.add(
            UpgradeWaiter(connection: ObjectIdentifier(connection), serial: connection.serial), deadline: deadline,
            arm: armUpgradeTimer)
    }

    private func armUpgradeTimer(at deadline: NIODeadline) -> Scheduled<Void> {
        eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [weak self] in
            self?.upgradeTimeoutsDue()
        }
    }

    /// The open connection `waiter` names, if it has not upgraded yet.
    private func awaitingUpgrade(_ waiter: UpgradeWaiter) -> RelayConnection? {
        guard let connection = connection(waiter.connection), connection.serial == waiter.serial,
            !connection.isUpgraded
        else { return nil }
        return connection
    }

    private func isAwaitingUpgrade(_ waiter: UpgradeWaiter) -> Bool {
        awaitingUpgrade(waiter) != nil
    }

    private func upgradeTimeoutsDue() {
        for waiter in upgradeDeadlines.due(at: eventLoop.now, arm: armUpgradeTimer) {
            guard let connection = awaitingUpgrade(waiter) else { continue }
            // A whole request is being decided, and its decision ends the connection or upgrades
            // it: a contact request waiting for its phone is answered 410 or 504 at the end of
            // the contact wait (which an upgrade timeout of the same length or shorter would
            // otherwise cut, leaving the desktop no answer), a refusal is being written.
            if connection.requestComplete { continue }
            if connection.requestStarted {
                // Cut short mid-request (a slow client, or a body declared and never sent): told so.
                connection.channel.pipeline.syncOperations.fireUserInboundEventTriggered(RelayRequestHandler.RequestTimedOut())
                continue
            }
            logger.debug("dropping a connection that sent nothing within \(configuration.upgradeTimeout.humanReadable)")
            connection.channel.close(promise: nil)
        }
    }

    /// Closes `channel` after the close-handshake timeout unless it closed by then (a peer that does
    /// not answer a close frame, or does not read the answer to its own). The queue holds the
    /// channel until then, or until it is the oldest entry and closed.
    func closeAfterHandshakeTimeout(_ channel: Channel) {
        closeDeadlines.dropSettled { !$0.isActive }
        closeDeadlines.add(
            channel, deadline: eventLoop.now + TimeAmount(configuration.closeHandshakeTimeout), arm: armCloseTimer)
    }

    private func armCloseTimer(at deadline: NIODeadline) -> Scheduled<Void> {
        eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [weak self] in
            guard let self else { return }
            for channel in self.closeDeadlines.due(at: self.eventLoop.now, arm: self.armCloseTimer) where channel.isActive {
                channel.close(promise: nil)
            }
        }
    }
}
