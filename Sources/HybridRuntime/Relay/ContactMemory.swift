import Logging
import Synchronization

/// What a relay remembers of linked phones: the contact IDs phones listened on (``known``) and the
/// ones they revoked (``revoked``), each oldest first. A relay that starts from a memory it saved
/// before (``RelayContactPersistence``, `hybrid-sim relay --contacts FILE`) answers a contact
/// request for a phone that listened before the restart, and is not back yet, 504 (not listening:
/// the desktop keeps its link) however long after the start it comes, and keeps answering 410 for
/// the IDs phones revoked (Docs/LINKING.md).
public struct RelayContactMemory: Sendable, Equatable {
    /// The most IDs of each kind a relay remembers (a flood of made-up listen tokens forgets the
    /// oldest, Docs/LINKING.md); a longer memory given to a relay keeps its newest.
    public static let capacity = 4096

    /// Contact IDs a phone listened on, oldest first.
    public var known: [[UInt8]]
    /// Contact IDs a phone revoked, oldest first.
    public var revoked: [[UInt8]]

    /// A memory of these IDs.
    public init(known: [[UInt8]] = [], revoked: [[UInt8]] = []) {
        self.known = known
        self.revoked = revoked
    }
}

/// Keeps a relay's ``RelayContactMemory`` across restarts (``RelayConfiguration/contactPersistence``).
///
/// The relay starts from ``initial`` and hands ``save`` its whole memory after a change: at most
/// once a second, off its event loops, one save at a time (a save that fails is logged as a warning
/// and the next change tries again), and once more when it shuts down (``TunnelRelay/shutdown()``
/// waits up to 5 s for that save). A memory the place holds already is not saved again: one equal
/// to the last saved (at first ``initial``) that ``current`` still reads back, so a relay with
/// nothing new to keep neither writes nor fails (a full disk) when it stops.
public struct RelayContactPersistence: Sendable {
    /// The memory the relay starts from, which the place holds.
    public var initial: RelayContactMemory
    /// Writes the memory somewhere it survives the process (`RelayContactFile` writes a file).
    public var save: @Sendable (RelayContactMemory) throws -> Void
    /// What the place holds now (`nil` when it cannot be read), to notice one removed or replaced
    /// since the last save; without it a memory equal to the last saved one is taken to be there.
    public var current: (@Sendable () -> RelayContactMemory?)?

    /// Persistence from `initial` through `save`; `current` reads back what the place holds.
    public init(
        initial: RelayContactMemory, current: (@Sendable () -> RelayContactMemory?)? = nil,
        save: @escaping @Sendable (RelayContactMemory) throws -> Void
    ) {
        self.initial = initial
        self.current = current
        self.save = save
    }
}

/// Runs a relay's contact-memory saves off the event loop, one at a time, newest memory only (a
/// save that is still running when another change comes is followed by one save of the newest).
final class ContactSaver: Sendable {
    private struct State {
        var pending: RelayContactMemory?
        var running = false
        /// Why the last save failed (`nil`: it succeeded, or none ran).
        var failure: String?
        /// The memory the place holds as far as known: the initial one, then each one saved.
        var saved: RelayContactMemory
    }

    private let persistence: RelayContactPersistence
    private let logger: Logger
    private let state: Mutex<State>

    init(_ persistence: RelayContactPersistence, logger: Logger) {
        self.persistence = persistence
        self.logger = logger
        self.state = Mutex(State(saved: persistence.initial))
    }

    /// Saves `memory` soon (after any save in progress).
    func submit(_ memory: RelayContactMemory) {
        let start = state.withLock { state in
            state.pending = memory
            guard !state.running else { return false }
            state.running = true
            return true
        }
        guard start else { return }
        Task.detached { self.drain() }
    }

    private func drain() {
        while let memory = state.withLock({ state -> RelayContactMemory? in
            guard let next = state.pending else {
                state.running = false
                return nil
            }
            state.pending = nil
            return next
        }) {
            // Nothing new since the last save, and the place still holds it: nothing to write.
            if state.withLock({ $0.saved == memory }), persistence.current.map({ $0() == memory }) ?? true {
                state.withLock { $0.failure = nil }
                continue
            }
            do {
                try persistence.save(memory)
                state.withLock { state in
                    state.failure = nil
                    state.saved = memory
                }
            } catch {
                state.withLock { $0.failure = "\(error)" }
                logger.warning("could not save the relay's contact memory (kept in memory; a later save tries again): \(error)")
            }
        }
    }

    /// Whether the last save failed (the memory on disk is older than the relay's).
    var lastSaveFailed: Bool { state.withLock { $0.failure != nil } }

    /// Waits until no save is pending or running, at most `limit`.
    /// - Returns: why the memory is not saved: the last save failed, or one was still pending or
    ///   running after `limit`; `nil` when it is.
    func flush(within limit: Duration = .seconds(5)) async -> String? {
        let deadline = ContinuousClock.now + limit
        while state.withLock({ $0.running || $0.pending != nil }), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
        return state.withLock { state in
            if state.running || state.pending != nil { return "the last save did not finish within \(limit.humanReadable)" }
            return state.failure
        }
    }
}
