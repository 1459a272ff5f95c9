#if canImport(Glibc)
import CHybridLinux
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// A child process started with `posix_spawn`, for `hybrid-sim demo` and the tests that run the
/// programs as processes: its standard streams set to given descriptors, every other descriptor
/// closed in the child, in a process group of its own, no signal blocked and SIGPIPE at its default
/// action, and its end reported once.
///
/// Foundation's `Process.run()` on Linux lists `/proc/self/fd` with a read that can run past the
/// end of glibc's directory buffer (swift-corelibs-foundation #5472, in Swift 6.3.1): a test run
/// that starts hundreds of children crashed in it (SIGSEGV in `memcpy` under `Process.run`). This
/// closes the child's other descriptors with `posix_spawn_file_actions_addclosefrom_np` (glibc
/// 2.34) instead, and `POSIX_SPAWN_CLOEXEC_DEFAULT` on Darwin.
package final class ChildSpawn: Sendable {
    /// How a child ended.
    package enum Ending: Sendable, Equatable {
        case exited(Int32)
        case killed(signal: Int32)
        /// Its end could not be learned (`waitpid` failed with this errno).
        case unknown(errno: Int32)
    }

    /// The child's process ID.
    package let pid: pid_t
    private let state = Mutex<(ending: Ending?, handlers: [@Sendable (Ending) -> Void])>((nil, []))

    /// Starts `executable` (a path) with `arguments` (not including the program name) and exactly
    /// `environment`; the child's standard input, output and error are `input`, `output` and
    /// `error` (`nil`: `/dev/null`). The caller closes its copies of the child's ends afterwards.
    package init(
        executable: String, arguments: [String], environment: [String: String],
        input: Int32?, output: Int32?, error: Int32?
    ) throws(SpawnError) {
        func check(_ result: Int32) throws(SpawnError) {
            guard result == 0 else { throw SpawnError(executable: executable, code: result) }
        }
        // A source below 3 that is not its own target could be overwritten by an earlier action
        // (stdout handed in as descriptor 0, say): such a one is copied above 2 first.
        var copies: [Int32] = []
        defer { for copy in copies { close(copy) } }
        func above2(_ source: Int32?, target: Int32) -> Int32? {
            guard let source, source < 3, source != target else { return source }
            let copy = fcntl(source, F_DUPFD_CLOEXEC, 3)
            guard copy >= 0 else { return source }
            copies.append(copy)
            return copy
        }
        let sources = [
            (STDIN_FILENO, above2(input, target: STDIN_FILENO)), (STDOUT_FILENO, above2(output, target: STDOUT_FILENO)),
            (STDERR_FILENO, above2(error, target: STDERR_FILENO)),
        ]
        #if canImport(Darwin)
        var actions: posix_spawn_file_actions_t? = nil
        var attributes: posix_spawnattr_t? = nil
        #else
        var actions = posix_spawn_file_actions_t()
        var attributes = posix_spawnattr_t()
        #endif
        try check(posix_spawn_file_actions_init(&actions))
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (target, source) in sources {
            if let source {
                try check(posix_spawn_file_actions_adddup2(&actions, source, target))
            } else {
                try check(posix_spawn_file_actions_addopen(
                    &actions, target, "/dev/null", target == STDIN_FILENO ? O_RDONLY : O_WRONLY, 0))
            }
        }
        try check(posix_spawnattr_init(&attributes))
        defer { posix_spawnattr_destroy(&attributes) }
        // As Foundation does: a terminal's Ctrl-C reaches the parent, which stops its children.
        var flags = Int32(POSIX_SPAWN_SETPGROUP)
        // The child starts with no signal blocked and SIGPIPE at its default: a spawn from a thread
        // of Swift concurrency's pool or Dispatch's would otherwise pass on their blocked signals
        // (a child that never ends on SIGTERM), and this process's ignored SIGPIPE.
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        try check(posix_spawnattr_setsigmask(&attributes, &noSignals))
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        try check(posix_spawnattr_setsigdefault(&attributes, &pipeSignal))
        flags |= Int32(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)
        #if canImport(Darwin)
        flags |= Int32(POSIX_SPAWN_CLOEXEC_DEFAULT)
        #else
        try check(posix_spawn_file_actions_addclosefrom_np(&actions, 3))
        #endif
        try check(posix_spawnattr_setflags(&attributes, Int16(flags)))
        try check(posix_spawnattr_setpgroup(&attributes, 0))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid = pid_t()
        try check(posix_spawn(&pid, executable, &actions, &attributes, argv, envp))
        self.pid = pid
        // One thread per child waits for its end, as Foundation's manager does.
        let thread = UnsafeMutablePointer<pthread_t>.allocate(capacity: 1)
        defer { thread.deallocate() }
        let box = Unmanaged.passRetained(self).toOpaque()
        guard pthread_create(thread, nil, { raw in
            let child = Unmanaged<ChildSpawn>.fromOpaque(raw!).takeRetainedValue()
            child.reap()
            return nil
        }, box) == 0 else {
            Unmanaged<ChildSpawn>.fromOpaque(box).release()
            kill(pid, SIGKILL)
            throw SpawnError(executable: executable, code: errno)
        }
        pthread_detach(thread.pointee)
    }

    /// Waits for the end without reaping first (the pid stays the child's while ``signal(_:)``
    /// may still use it), then reaps and records it under the lock ``signal(_:)`` takes.
    private func reap() {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0, errno == EINTR {}
        let handlers = state.withLock { state -> [@Sendable (Ending) -> Void] in
            var status: Int32 = 0
            var result: pid_t
            repeat { result = waitpid(pid, &status, 0) } while result < 0 && errno == EINTR
            let low = status & 0x7F
            state.ending =
                result != pid ? .unknown(errno: errno) : low == 0 ? .exited((status >> 8) & 0xFF) : .killed(signal: low)
            defer { state.handlers = [] }
            return state.handlers
        }
        guard let ended else { return }
        for handler in handlers { handler(ended) }
    }

    /// How the child ended, once it has (`nil` while it runs).
    package var ended: Ending? { state.withLock { $0.ending } }

    /// Whether the child has not ended yet.
    package var isRunning: Bool { ended == nil }

    /// Calls `handler` once the child has ended (at once, on this thread, if it already has).
    package func onEnd(_ handler: @escaping @Sendable (Ending) -> Void) {
        let ended: Ending? = state.withLock { state in
            if let end = state.ending { return end }
            state.handlers.append(handler)
            return nil
        }
        if let ended { handler(ended) }
    }

    /// A pipe for a child's standard stream, both ends close-on-exec from the start (`pipe2` with
    /// `O_CLOEXEC` on Linux), so no other program started meanwhile holds an end; the child gets
    /// its end as a standard descriptor, where `dup2` clears the flag. `nil`: no pipe, with `errno`.
    package static func pipe() -> (read: Int32, write: Int32)? {
        var ends: [Int32] = [-1, -1]
        #if canImport(Glibc)
        guard pipe2(&ends, O_CLOEXEC) == 0 else { return nil }
        #else
        guard Darwin.pipe(&ends) == 0 else { return nil }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        #endif
        return (ends[0], ends[1])
    }

    /// Sends `signal` (default SIGTERM) unless the child has been reaped: never to a process ID
    /// that could have passed to another process.
    package func signal(_ signal: Int32 = SIGTERM) {
        state.withLock { state in
            guard state.ending == nil else { return }
            kill(pid, signal)
        }
    }
}

/// A program that could not be started.
package struct SpawnError: Error, CustomStringConvertible {
    package var executable: String
    package var code: Int32
    package var description: String { "cannot start \(executable): \(String(cString: strerror(code)))" }
}
