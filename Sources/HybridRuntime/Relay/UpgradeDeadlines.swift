import NIOCore

/// The upgrade timeouts of one shard's connections (``RelayConfiguration/upgradeTimeout``): a
/// queue and one event-loop timer, instead of a timer per connection.
///
/// Every connection of a shard gets the same timeout, so the order connections arrive in is the
/// order their deadlines fall in: a first-in-first-out queue, not a heap. A connection that upgrades
/// or closes is not taken out then; its entry is skipped when its deadline comes, or dropped sooner
/// once it is the oldest and a new connection arrives (``dropSettled(_:)``). Neither costs anything
/// then, whereas cancelling a NIO timer (`Scheduled.cancel`) searches the loop's whole timer heap,
/// which holds a timer per open tunnel: at 9,000 tunnels that search was a few percent of the relay's
/// cost of opening one (Docs/BENCHMARKS.md).
///
/// The timer runs when the oldest deadline falls due, but at most once per ``granularity``, so a
/// connection is closed between its deadline and one granularity (a twentieth of the timeout, at
/// most 100 ms) after it. Confined to the shard's event loop.
struct UpgradeDeadlines {
    private struct Entry {
        var deadline: NIODeadline
        var connection: ObjectIdentifier
        /// Tells this connection from a later one at the same address (``RelayConnection/serial``).
        var serial: UInt64
    }

    private var entries = CircularBuffer<Entry>()
    private var timer: Scheduled<Void>?
    private var lastSerial: UInt64 = 0
    /// The most a timed-out connection may outlive its deadline.
    let granularity: TimeAmount

    init(timeout: Duration) {
        granularity = min(TimeAmount(timeout / 20), .milliseconds(100))
    }

    /// Connections waiting in the queue (including ones that upgraded or closed since).
    var count: Int { entries.count }

    /// A serial number for a new connection (the first is 1).
    mutating func nextSerial() -> UInt64 {
        lastSerial &+= 1
        return lastSerial
    }

    /// Adds the connection `connection` with serial number `serial`, due at `deadline` (not earlier
    /// than any deadline added before); `arm` schedules the timer when none is pending.
    mutating func add(
        _ connection: ObjectIdentifier, serial: UInt64, deadline: NIODeadline, arm: (NIODeadline) -> Scheduled<Void>
    ) {
        entries.append(Entry(deadline: deadline, connection: connection, serial: serial))
        if timer == nil { timer = arm(deadline) }
    }

    /// Removes the oldest entries for as long as `settled` says their connection no longer waits
    /// (it upgraded or closed), so the queue holds about as many entries as connections waiting for
    /// their upgrade rather than every connection of the last timeout's length.
    mutating func dropSettled(_ settled: (_ connection: ObjectIdentifier, _ serial: UInt64) -> Bool) {
        while let first = entries.first, settled(first.connection, first.serial) {
            entries.removeFirst()
        }
    }

    /// The timer fired at `now`: removes every entry due and returns them (the caller closes those
    /// still waiting for their upgrade), and when entries remain re-arms the timer for the oldest,
    /// no sooner than one granularity from now.
    mutating func due(
        at now: NIODeadline, arm: (NIODeadline) -> Scheduled<Void>
    ) -> [(connection: ObjectIdentifier, serial: UInt64)] {
        timer = nil
        var due: [(connection: ObjectIdentifier, serial: UInt64)] = []
        while let first = entries.first, first.deadline <= now {
            entries.removeFirst()
            due.append((first.connection, first.serial))
        }
        if let first = entries.first {
            timer = arm(max(first.deadline, now + granularity))
        }
        return due
    }

    /// Stops the timer (the relay is shutting down and closes every connection itself).
    mutating func stop() {
        timer?.cancel()
        timer = nil
        entries.removeAll()
    }
}

extension RelayRegistry {
    /// Starts `connection`'s upgrade timeout: it is closed if it has not upgraded by then.
    func startUpgradeTimeout(of connection: RelayConnection) {
        // The loop's own clock: an EmbeddedEventLoop's (the fuzz probe's, tests') is virtual.
        let deadline = eventLoop.now + TimeAmount(configuration.upgradeTimeout)
        upgradeDeadlines.dropSettled { id, serial in !isAwaitingUpgrade(id, serial: serial) }
        upgradeDeadlines.add(
            ObjectIdentifier(connection), serial: connection.serial, deadline: deadline, arm: armUpgradeTimer)
    }

    private func armUpgradeTimer(at deadline: NIODeadline) -> Scheduled<Void> {
        eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [weak self] in
            self?.upgradeTimeoutsDue()
        }
    }

    /// Whether the connection `id` with serial number `serial` is open and not upgraded yet.
    private func isAwaitingUpgrade(_ id: ObjectIdentifier, serial: UInt64) -> Bool {
        guard let connection = connection(id), connection.serial == serial else { return false }
        return !connection.isUpgraded
    }

    private func upgradeTimeoutsDue() {
        for entry in upgradeDeadlines.due(at: eventLoop.now, arm: armUpgradeTimer) {
            guard isAwaitingUpgrade(entry.connection, serial: entry.serial), let connection = connection(entry.connection)
            else { continue }
            logger.debug(
                "dropping a connection that did not complete its request within \(configuration.upgradeTimeout.humanReadable)"
            )
            connection.channel.close(promise: nil)
        }
    }
}
