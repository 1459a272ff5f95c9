import Foundation
import Synchronization

/// The desktop's `--json` event lines, kept for `desktop --web`: every page that connects gets the
/// whole story so far, then each new event, until the last one (`result` or `error`).
package final class DesktopWebEvents: Sendable {
    private struct State {
        var lines: [String] = []
        var finished = false
        var waiters: [UUID: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Mutex(State())

    /// An empty stream.
    package init() {}

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
        let id = UUID()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let ready = self.state.withLock { state -> Bool in
                        if state.lines.count > count || state.finished { return true }
                        state.waiters[id] = continuation
                        return false
                    }
                    if ready { continuation.resume() }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                let waiter = self.state.withLock { $0.waiters.removeValue(forKey: id) }
                waiter?.resume()
            }
            await group.next()
            group.cancelAll()
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
