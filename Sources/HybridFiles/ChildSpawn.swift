#if canImport(Glibc)
import CHybridLinux
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// A child process started with `posix_spawn`, for `hybrid-sim demo` and the tests that run the
/// programs as processes: its standard streams set to given descriptors, every other descriptor
/// closed in the child, in a process group of its own, and its end reported once.
///
/// Foundation's `Process.run()` on Linux lists `/proc/self/fd` with a read that can run past the
/// end of glibc's directory buffer (swift-corelibs-foundation #5472, in Swift 6.3.1): a test run
/// that starts hundreds of children crashed in it (SIGSEGV in `memcpy` under `Process.run`). This
/// closes the child's other descriptors with `posix_spawn_file_actions_addclosefrom_np` instead.
package final class ChildSpawn: Sendable {
    /// How a child ended.
    package enum Ending: Sendable, Equatable {
        case exited(Int32)
        case killed(signal: Int32)
    }

    /// The child's process ID.
    package let pid: pid_t
    private let ending = Mutex<(ending: Ending?, handlers: [@Sendable (Ending) -> Void])>((nil, []))

    /// Starts `executable` with `arguments` (not including the program name) and exactly
    /// `environment`; the child's standard input, output and error are `input`, `output` and
    /// `error` (`nil`: `/dev/null`). The caller closes its copies of the child's ends afterwards.
    package init(
        executable: String, arguments: [String], environment: [String: String],
        input: Int32?, output: Int32?, error: Int32?
    ) throws(SpawnError) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (target, source) in [(STDIN_FILENO, input), (STDOUT_FILENO, output), (STDERR_FILENO, error)] {
            if let source {
                posix_spawn_file_actions_adddup2(&actions, source, target)
            } else {
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == STDIN_FILENO ? O_RDONLY : O_WRONLY, 0)
            }
        }
        #if canImport(Glibc)
        posix_spawn_file_actions_addclosefrom_np(&actions, 3)
        #endif
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // As Foundation does: a terminal's Ctrl-C reaches the parent, which stops its children.
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid = pid_t()
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else { throw SpawnError(executable: executable, code: result) }
        self.pid = pid
        // One thread per child waits for its end (a blocking waitpid), as Foundation's manager does.
        Thread.detachNewThread { [self] in reap() }
    }

    private func reap() {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        let low = status & 0x7F
        let end: Ending = low == 0 ? .exited((status >> 8) & 0xFF) : .killed(signal: low)
        let handlers = ending.withLock { state in
            state.ending = end
            defer { state.handlers = [] }
            return state.handlers
        }
        for handler in handlers { handler(end) }
    }

    /// How the child ended, once it has (`nil` while it runs).
    package var ended: Ending? { ending.withLock { $0.ending } }

    /// Whether the child has not ended yet.
    package var isRunning: Bool { ended == nil }

    /// Calls `handler` once the child has ended (at once, on this thread, if it already has).
    package func onEnd(_ handler: @escaping @Sendable (Ending) -> Void) {
        let ended: Ending? = ending.withLock { state in
            if let end = state.ending { return end }
            state.handlers.append(handler)
            return nil
        }
        if let ended { handler(ended) }
    }

    /// Sends `signal` (default SIGTERM) unless the child has ended.
    package func signal(_ signal: Int32 = SIGTERM) {
        guard isRunning else { return }
        kill(pid, signal)
    }

    /// Blocks until the child has ended.
    package func waitUntilEnded() -> Ending {
        let done = Mutex<Ending?>(nil)
        let semaphore = Semaphore()
        onEnd { end in
            done.withLock { $0 = end }
            semaphore.signal()
        }
        semaphore.wait()
        return done.withLock { $0 }!
    }
}

/// A program that could not be started.
package struct SpawnError: Error, CustomStringConvertible {
    package var executable: String
    package var code: Int32
    package var description: String { "cannot start \(executable): \(String(cString: strerror(code)))" }
}

/// A counting semaphore over a pthread condition, for ``ChildSpawn/waitUntilEnded()``.
private final class Semaphore: @unchecked Sendable {
    private var mutex = pthread_mutex_t()
    private var condition = pthread_cond_t()
    private var count = 0

    init() {
        pthread_mutex_init(&mutex, nil)
        pthread_cond_init(&condition, nil)
    }

    deinit {
        pthread_cond_destroy(&condition)
        pthread_mutex_destroy(&mutex)
    }

    func signal() {
        pthread_mutex_lock(&mutex)
        count += 1
        pthread_cond_signal(&condition)
        pthread_mutex_unlock(&mutex)
    }

    func wait() {
        pthread_mutex_lock(&mutex)
        while count == 0 { pthread_cond_wait(&condition, &mutex) }
        count -= 1
        pthread_mutex_unlock(&mutex)
    }
}
