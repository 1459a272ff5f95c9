#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore
import Synchronization

/// The episodes in which a listener's `accept` fails for want of descriptors or memory (`EMFILE`,
/// `ENFILE`, `ENOBUFS`, `ENOMEM`): accepting pauses for a moment after each failure (NIO's
/// `AcceptBackoffHandler`, the relay's dispatcher), and the operator reads one line when an episode
/// begins and one when accepting works again, with the failures counted, instead of nothing while
/// clients time out.
///
/// An episode begins at a failure when none is on and ends at the next connection accepted. A
/// flood that keeps the process at its limit starts one each time a connection closes: the lines
/// that begin them are metered (``burst`` at once, then one every ``quietSeconds``); an episode
/// whose first line was held back says nothing at its end either, and the next line that is written
/// counts the episodes not shown. Thread-safe.
package final class AcceptFailures: Sendable {
    /// Episode lines written at once.
    package static let burst = 3.0
    /// Seconds between episode lines after the burst.
    package static let quietSeconds = 60.0
    /// How long accepting pauses after a failed `accept` (every listener of this project's).
    package static let backoff = TimeAmount.milliseconds(10)

    /// What a line is about.
    package enum Line: Sendable, Equatable {
        /// Accepting paused: the first failure of an episode (a warning).
        case paused(String)
        /// Accepting works again: the episode's end.
        case resumed(String)
    }

    private struct State {
        var bucket = TokenBucket(burst: AcceptFailures.burst, perSecond: 1 / AcceptFailures.quietSeconds)
        var failures = 0
        var began: NIODeadline?
        var reason = ""
        var logged = false
        var unshown = 0
    }

    private let state = Mutex(State())
    /// An episode is on: an accept that succeeds ends it (read without the lock on every accept).
    private let episodeOn = Atomic<Bool>(false)
    private let write: @Sendable (Line) -> Void

    /// Writes each line with `write`.
    package init(_ write: @escaping @Sendable (Line) -> Void) {
        self.write = write
    }

    /// The `errno` values of an `accept` that pauses accepting (the system is short of something,
    /// not the connection at fault).
    package static func pauses(errno code: CInt) -> Bool {
        code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM
    }

    /// What `errno` means for an operator: for `EMFILE` with the process's open-file limit.
    package static func reason(errno code: CInt) -> String {
        switch code {
        case EMFILE:
            let limit = softLimit().map { " (limit \($0))" } ?? ""
            return "too many open files\(limit)"
        case ENFILE: return "the system's open-file table is full"
        default: return "out of memory for sockets (\(RuntimeError.systemReason(errno: code)))"
        }
    }

    /// An `accept` failed with `errno` (``pauses(errno:)``); begins an episode if none is on.
    package func failed(errno code: CInt, now: NIODeadline = .now()) {
        let line: String? = state.withLock { state in
            state.failures += 1
            guard state.began == nil else { return nil }
            state.began = now
            state.reason = Self.reason(errno: code)
            episodeOn.store(true, ordering: .relaxed)
            state.logged = state.bucket.take(now: now)
            guard state.logged else {
                state.unshown += 1
                return nil
            }
            let unshown = state.unshown
            state.unshown = 0
            let advice = code == EMFILE ? ": close connections or raise `ulimit -n`" : ""
            let earlier = unshown > 0 ? " (\(unshown) earlier episode(s) not shown: at most one line a minute)" : ""
            return "accept paused: \(state.reason); new connections wait in the kernel's queue until some close\(advice)\(earlier)"
        }
        if let line { write(.paused(line)) }
    }

    /// A connection was accepted; ends the episode on, if any.
    package func accepted(now: NIODeadline = .now()) {
        guard episodeOn.load(ordering: .relaxed) else { return }
        let line: String? = state.withLock { state in
            guard let began = state.began else { return nil }
            defer {
                state.began = nil
                state.failures = 0
                episodeOn.store(false, ordering: .relaxed)
            }
            guard state.logged else { return nil }
            let seconds = Double((now - began).nanoseconds) / 1e9
            let elapsed = seconds < 10 ? "\((seconds * 10).rounded() / 10)" : "\(Int(seconds.rounded()))"
            return "accepting again: \(state.failures) accept(s) failed over \(elapsed) s (\(state.reason))"
        }
        if let line { write(.resumed(line)) }
    }

    /// The process's soft open-file limit, `nil` if unknown or unlimited.
    private static func softLimit() -> Int? {
        var limit = rlimit()
        #if canImport(Glibc)
        let resource = Int32(RLIMIT_NOFILE.rawValue)
        #else
        let resource = RLIMIT_NOFILE
        #endif
        guard getrlimit(resource, &limit) == 0, limit.rlim_cur != rlim_t.max else { return nil }
        return Int(clamping: limit.rlim_cur)
    }
}

/// On a listening channel after NIO's `AcceptBackoffHandler`: reports its failed accepts to
/// ``AcceptFailures`` and its accepted connections too (which end an episode). The failures stop
/// here, as the back-off handler's own `shouldForwardIOErrorCaught: false` would stop them.
package final class AcceptFailureHandler: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = Channel
    package typealias InboundOut = Channel

    private let failures: AcceptFailures

    /// Reports to `failures`.
    package init(failures: AcceptFailures) {
        self.failures = failures
    }

    /// Installs, in a server channel's initializer, an `AcceptBackoffHandler` that pauses accepting
    /// for `backoff` after a failed `accept` (instead of spinning on a listener that stays readable:
    /// NIO's `ServerBootstrap.bind(host:port:)` adds none) and, after it, this handler.
    package static func install(
        on channel: any Channel, failures: AcceptFailures, backoff: TimeAmount = AcceptFailures.backoff
    ) throws {
        let operations = channel.pipeline.syncOperations
        try operations.addHandler(AcceptBackoffHandler(shouldForwardIOErrorCaught: true) { _ in backoff })
        try operations.addHandler(AcceptFailureHandler(failures: failures))
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        failures.accepted()
        context.fireChannelRead(data)
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let error = error as? IOError else {
            context.fireErrorCaught(error)
            return
        }
        if AcceptFailures.pauses(errno: error.errnoCode) { failures.failed(errno: error.errnoCode) }
    }
}
