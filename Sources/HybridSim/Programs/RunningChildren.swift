import Foundation
import HybridFiles
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The child processes a program started and that still run (the demo's desktop and phone, the
/// relay `bench relay` and `bench hostile` start), so that a signal's ending stops them all: each
/// runs in a process group of its own, which a terminal's Ctrl-C does not reach, and would outlive
/// the program that started it.
package enum RunningChildren {
    private static let state = Mutex<(pids: Set<pid_t>, stopping: Bool)>(([], false))

    /// Starts a child with `start`, registered until it ends. Refused (`CancellationError`) once
    /// ``stopAll(within:)`` began: a child started then would be left behind.
    package static func spawn(_ start: () throws -> ChildSpawn) throws -> ChildSpawn {
        let child = try state.withLock { state in
            guard !state.stopping else { throw CancellationError() }
            let child = try start()
            state.pids.insert(child.pid)
            return child
        }
        // Outside the lock: a child that has already ended is unregistered at once, on this thread.
        let pid = child.pid
        child.onEnd { _ in state.withLock { _ = $0.pids.remove(pid) } }
        return child
    }

    /// Sends SIGTERM to every child still running (each ends with its own final line) and waits
    /// up to `limit` for them to end. No child starts from now on. Returns the ones it stopped.
    @discardableResult
    package static func stopAll(within limit: Duration) -> [pid_t] {
        // The snapshot and the refusal of new children are one step: none starts unseen.
        let pids = state.withLock { state in
            state.stopping = true
            return state.pids.sorted()
        }
        for pid in pids { kill(pid, SIGTERM) }
        let deadline = ContinuousClock.now + limit
        while !state.withLock({ $0.pids.isEmpty }), ContinuousClock.now < deadline { usleep(10_000) }
        return pids
    }
}
