import Foundation
import Synchronization

/// The desktop's `--json` event lines, kept for `desktop --web`: every page that connects gets the
/// whole story so far, then each new event, until the last one (`result` or `error`). It also counts
/// the streams that opened, so a program can say that a page is following and wait for one.
package final class DesktopWebEvents: Sendable {
    struct State {
        var lines: [String] = []
        var finished = false
        var waiters: [UUID: CheckedContinuation<Void, Never>] = [:]
        var opened = 0
        var openWaiters: [UUID: CheckedContinuation<Void, Never>] = [:]
        /// Waits whose timeout (or cancellation) came before they had registered.
        var expired: Set<UUID> = []
    }

    private let state = Mutex(State())
    private let announcing = Mutex(())
    private let onStreamOpened: @Sendable (Int) -> Void
    private let onRefused: @Sendable (String) -> Void

    /// An empty stream. `onStreamOpened` is called with the count so far each time a page (or any
    /// other client with the page's token) opens `events`, one call at a time and in the order of
    /// the counts; `onRefused` with a line for each request refused as another site's, without the
    /// page's token or malformed (400, 403, 421), so whoever runs the program sees an attempt.
    package init(
        onStreamOpened: @escaping @Sendable (Int) -> Void = { _ in }, onRefused: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.onStreamOpened = onStreamOpened
        self.onRefused = onRefused
    }

    /// Reports a refused request (the server calls it).
    func refused(_ line: String) {
        onRefused(line)
    }

    /// How many `/events` streams have opened so far.
    package var streamsOpened: Int { state.withLock { $0.opened } }

    /// Records that a client opened `/events` (the server calls it before sending anything).
    func streamOpened() {
        // Counted and announced under one lock of their own: two streams opening at once on two
        // event loops are announced 1 then 2, never 2 then 1. The announcement must not open a
        // stream itself (it writes a line).
        announcing.withLock { _ in
            let (count, waiters) = state.withLock { state -> (Int, [CheckedContinuation<Void, Never>]) in
                state.opened += 1
                defer { state.openWaiters = [:] }
                return (state.opened, Array(state.openWaiters.values))
            }
            for waiter in waiters { waiter.resume() }
            onStreamOpened(count)
        }
    }

    /// Waits until a stream has opened, at most `timeout`; returns whether one did.
    package func waitForStream(timeout: Duration) async -> Bool {
        await wait(timeout: timeout, for: .streams) { $0.opened > 0 }
        return streamsOpened > 0
    }

    /// Adds one event line; a `result` or `error` event ends the stream.
    package func append(_ line: String) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard !state.finished else { return [] }
            state.lines.append(line)
            if line.hasPrefix("{\"event\":\"result\"") || line.hasPrefix("{\"event\":\"error\"") { state.finished = true }
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Ends the stream without a last event (the program stopped).
    package func finish() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.finished = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Lines from index `from` on, and whether the stream has ended.
    package func lines(from index: Int) -> (lines: [String], finished: Bool) {
        state.withLock { state in (Array(state.lines.dropFirst(index)), state.finished) }
    }

    /// Waits until there are more than `count` lines or the stream ended (at most `timeout`).
    func waitForMore(than count: Int, timeout: Duration) async {
        await wait(timeout: timeout, for: .events) { $0.lines.count > count || $0.finished }
    }

    /// What a wait is for: the next event, or the first stream.
    enum Waiting: Sendable {
        case events, streams

        fileprivate var list: WritableKeyPath<State, [UUID: CheckedContinuation<Void, Never>]> & Sendable {
            switch self {
            case .events: \.waiters
            case .streams: \.openWaiters
            }
        }
    }

    /// Suspends until `ready` holds (checked now, then each time the waiters for `what` are
    /// resumed), `timeout` passed, or the task is cancelled.
    private func wait(timeout: Duration, for what: Waiting, until ready: @escaping @Sendable (State) -> Bool) async {
        let id = UUID()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    if self.register(id, continuation, for: what, unless: ready) { continuation.resume() }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                self.expire(id, for: what)?.resume()
            }
            await group.next()
            group.cancelAll()
        }
        state.withLock { _ = $0.expired.remove(id) }
    }

    /// Registers wait `id` unless `ready` holds already or its timeout ran first (at once, when its
    /// task was cancelled): then it returns `true` and the caller resumes at once.
    func register(
        _ id: UUID, _ continuation: CheckedContinuation<Void, Never>, for what: Waiting,
        unless ready: (State) -> Bool = { _ in false }
    ) -> Bool {
        state.withLock { state in
            if ready(state) || state.expired.remove(id) != nil { return true }
            state[keyPath: what.list][id] = continuation
            return false
        }
    }

    /// Wait `id`'s timeout: removes and returns its continuation, or, when it has not registered
    /// yet, marks it expired so that it does not.
    func expire(_ id: UUID, for what: Waiting) -> CheckedContinuation<Void, Never>? {
        state.withLock { state in
            let waiter = state[keyPath: what.list].removeValue(forKey: id)
            if waiter == nil { state.expired.insert(id) }
            return waiter
        }
    }

    /// Streams waiting for the next event (for tests).
    package var waitingStreams: Int { state.withLock { $0.waiters.count } }

    /// The `FIDO:/` URL of the `qr` event, once there is one.
    var qrURL: String? {
        let line = state.withLock { $0.lines.first { $0.hasPrefix("{\"event\":\"qr\"") } }
        guard let line, let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
        return object["url"] as? String
    }
}
