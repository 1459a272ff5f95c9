import Foundation
import HybridFiles
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's SIGINT, SIGTERM, SIGHUP and SIGQUIT, caught with `sigaction` from the first line
/// of `main` and handed, one at a time, to the handler a command routes them to.
///
/// Why not `signal(SIG_IGN)` and a dispatch source: between the two, a signal was ignored, lost,
/// and a `relay` or `phone --listen` that got it in its first 20 ms ran on forever. Here the
/// handler replaces the default action in one step: it writes the signal's number to a pipe
/// (`write(2)` is async-signal-safe), and a thread of its own reads the pipe and calls the routed
/// handler. A signal with no handler routed yet gets its default action, as if nothing were
/// installed (the process ends by that signal). A SIGHUP ignored on entry (`nohup`) stays ignored;
/// the four signals blocked on entry (an inherited mask) are unblocked.
package enum SignalRouter {
    /// The signals routed. SIGHUP (the terminal closed) and SIGQUIT (Ctrl-\) end a program as
    /// SIGINT and SIGTERM do; the Swift runtime printed a crash report for SIGQUIT and went on.
    package static let signals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]
    /// SIGUSR1 asks a running program for its status: caught only once a program routes it
    /// (``routeStatus(_:)``, the relay); every other command leaves it alone (its default action,
    /// or an ignore or block its parent set).
    package static let statusSignal: Int32 = SIGUSR1
    private static let statusInstalled = Mutex(false)

    /// The pipe's write end, for the C handler. Set once, before any handler is installed.
    nonisolated(unsafe) private static var pipeWriteEnd: Int32 = -1
    private static let handler = Mutex<(@Sendable (Int32) -> Void)?>(nil)
    private static let statusHandler = Mutex<(@Sendable () -> Void)?>(nil)
    private static let installed = Mutex(false)

    /// Installs the handlers and starts the reading thread (once; later calls do nothing).
    package static func install() {
        let first = installed.withLock { done in
            defer { done = true }
            return !done
        }
        guard first else { return }
        // A parent may start a program with these signals blocked (a process spawned from a
        // thread that blocks them, as Swift concurrency's and Dispatch's threads do, inherits the
        // mask): a blocked signal stays pending and never ends it. The calling thread is `main`'s,
        // which then receives them; threads started later inherit its mask.
        var routed = sigset_t()
        sigemptyset(&routed)
        for number in signals { sigaddset(&routed, number) }
        pthread_sigmask(SIG_UNBLOCK, &routed, nil)
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { return }  // no pipe: the default actions stay
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        pipeWriteEnd = ends[1]
        let readEnd = ends[0]
        Thread.detachNewThread {
            var byte: UInt8 = 0
            while true {
                let count = read(readEnd, &byte, 1)
                if count < 0, errno == EINTR { continue }
                guard count == 1 else { return }
                deliver(Int32(byte))
            }
        }
        for number in signals {
            // `nohup` starts a program with SIGHUP ignored so that it outlives its terminal:
            // that stays so. (SIGINT and SIGQUIT are caught even when inherited ignored, as a
            // script's background job has them, so `kill -INT` still stops a relay started with &.)
            var current = sigaction()
            if number == SIGHUP, sigaction(number, nil, &current) == 0, Self.isIgnored(current) { continue }
            catchSignal(number)
        }
    }

    /// Replaces `number`'s action with the forwarding handler.
    private static func catchSignal(_ number: Int32) {
        var action = sigaction()
        #if canImport(Glibc)
        action.__sigaction_handler.sa_handler = forward
        #else
        action.__sigaction_u.__sa_handler = forward
        #endif
        sigemptyset(&action.sa_mask)
        action.sa_flags = SA_RESTART
        sigaction(number, &action, nil)
    }

    /// From now on `handler` gets each signal (on the router's thread); `nil` restores the
    /// default actions' effect.
    package static func route(_ handler: (@Sendable (Int32) -> Void)?) {
        self.handler.withLock { $0 = handler }
    }

    /// From now on `handler` answers SIGUSR1 (on the router's thread), and the program goes on.
    /// Once routed, SIGUSR1 stays caught: with `nil` afterwards a SIGUSR1 gets its default action
    /// (the process ends), and a later handler is not caught again (nothing routes `nil` today).
    package static func routeStatus(_ handler: (@Sendable () -> Void)?) {
        statusHandler.withLock { $0 = handler }
        guard handler != nil else { return }
        install()
        let first = statusInstalled.withLock { done in
            defer { done = true }
            return !done
        }
        guard first else { return }
        // Ignored on entry (a supervisor that wants no status from it): stays so, like SIGHUP under
        // nohup; blocked on entry, it stays blocked (this may not run on main's thread).
        var current = sigaction()
        if sigaction(statusSignal, nil, &current) == 0, isIgnored(current) { return }
        catchSignal(statusSignal)
    }

    /// `SIGINT`, `SIGTERM`, …; `signal N` for one without a name here.
    package static func name(_ number: Int32) -> String {
        knownName(number) ?? "signal \(number)"
    }

    /// The name of a signal that ends or stops programs (`SIGKILL`, `SIGSEGV`, …), or `nil`.
    package static func knownName(_ number: Int32) -> String? {
        switch number {
        case SIGHUP: return "SIGHUP"
        case SIGINT: return "SIGINT"
        case SIGQUIT: return "SIGQUIT"
        case SIGILL: return "SIGILL"
        case SIGABRT: return "SIGABRT"
        case SIGBUS: return "SIGBUS"
        case SIGFPE: return "SIGFPE"
        case SIGKILL: return "SIGKILL"
        case SIGSEGV: return "SIGSEGV"
        case SIGPIPE: return "SIGPIPE"
        case SIGTERM: return "SIGTERM"
        case SIGUSR1: return "SIGUSR1"
        default: return nil
        }
    }

    private static func isIgnored(_ action: sigaction) -> Bool {
        #if canImport(Glibc)
        return unsafeBitCast(action.__sigaction_handler.sa_handler, to: Int.self) == 1  // SIG_IGN
        #else
        return unsafeBitCast(action.__sigaction_u.__sa_handler, to: Int.self) == 1
        #endif
    }

    /// The C handler: only an async-signal-safe `write`.
    private static let forward: @convention(c) (Int32) -> Void = { number in
        var byte = UInt8(truncatingIfNeeded: number)
        let saved = errno
        _ = write(SignalRouter.pipeWriteEnd, &byte, 1)
        errno = saved
    }

    private static func deliver(_ number: Int32) {
        if number == statusSignal, let status = statusHandler.withLock({ $0 }) {
            status()
            return
        }
        if number != statusSignal, let routed = handler.withLock({ $0 }) {
            routed(number)
            return
        }
        // Nothing routed: the signal's own default action, as if no handler were installed (after
        // the lines standard error still queues, briefly: they were written before it was queued).
        StandardStream.error.drain(timeout: .seconds(2))
        signal(number, SIG_DFL)
        kill(getpid(), number)
    }
}
