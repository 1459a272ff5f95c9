import Foundation
import HybridFiles
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// SIGINT and SIGTERM (and SIGHUP, SIGQUIT) end a program with final lines instead of killing it mid-line: `desktop` and
/// `phone` as every other failure ends (``failure(json:flow:)``: one `error: interrupted by SIGINT`
/// line, with `--json` an `error` event as the last stdout line, exit 128 + the signal, i.e. 130
/// or 143), and `phone --listen`, whose normal end is Ctrl-C, with its `result`.
///
/// The process exits at once (`_exit`, after the lines; after `settle` when one is given, as
/// `desktop --web` does for its open pages). The peer finds the connection gone: with
/// the desktop's embedded relay the relay goes too and the phone sees 1006 (an error); through an
/// external relay the relay closes the phone's side with 1001, which a phone that had already sent
/// its response takes for an orderly end (Docs/PROTOCOL-TOLERANCE.md).
///
/// A program about to write its own final lines calls ``beginEnding()`` first: a signal after
/// that leaves the lines alone and the process ends on its own (its remaining teardown is bounded),
/// so the output never has two final lines.
package enum Interruption {
    /// What a signal ends the process with.
    package struct Ending: Sendable {
        /// The last stdout line, if any (a `--json` event).
        package var standardOutput: String?
        /// The last stderr line.
        package var standardError: String
        /// The exit status.
        package var status: Int32

        package init(standardOutput: String?, standardError: String, status: Int32) {
            self.standardOutput = standardOutput
            self.standardError = standardError
            self.status = status
        }
    }

    /// Who is writing the process's final lines.
    private enum Stage {
        case running, programEnding, signalEnding
        /// The program's lines are written and it only lingers: a signal exits with this status.
        case lingering(Int32)
    }

    /// Whether the handlers are installed, and the stage.
    private static let state = Mutex((installed: false, stage: Stage.running))

    /// Makes SIGINT, SIGTERM, SIGHUP and SIGQUIT (``SignalRouter``) end the program:
    /// `ending(signal name, 128 + signal)` gives the lines to write and the status to exit with.
    /// Call once, early, from the command.
    ///
    /// `settle`: how long the process still runs after writing the lines, for an `output` that
    /// also hands them to open connections (`desktop --web`'s page streams); zero otherwise.
    package static func endOnSignals(
        output: ProgramOutput = .standard, settle: Duration = .zero,
        _ ending: @escaping @Sendable (_ signal: String, _ status: Int32) -> Ending
    ) {
        state.withLock { $0.installed = true }
        SignalRouter.install()
        SignalRouter.route { number in
            let (first, lingering) = state.withLock { state -> (Bool, Int32?) in
                if case .lingering(let status) = state.stage { return (false, status) }
                guard case .running = state.stage else { return (false, nil) }
                state.stage = .signalEnding
                return (true, nil)
            }
            // The program's lines are written and it only lingers: out now (what stderr still
            // queues first, briefly; not under the lock, which output callbacks take).
            if let lingering {
                StandardStream.error.drain(timeout: .seconds(2))
                _exit(lingering)
            }
            // The program is writing its own ending: leave it to finish and exit.
            guard first else { return }
            let end = ending(SignalRouter.name(number), 128 + number)
            if let line = end.standardOutput { output.standardOutput(line) }
            output.standardError(end.standardError)
            if settle > .zero {
                let (seconds, attoseconds) = settle.components
                usleep(useconds_t(seconds * 1_000_000 + attoseconds / 1_000_000_000_000))
            }
            // Its lines are queued (standard error): written first, unless the reader does not read.
            StandardStream.error.drain(timeout: .seconds(2))
            _exit(end.status)
        }
    }

    /// Called by a program before it writes its final lines (`result`, or its failure). If a
    /// signal's ending already began, this waits for the process to exit, so that its lines stay
    /// the last ones. Does nothing where ``endOnSignals(output:settle:_:)`` was not called (the programs
    /// run in-process in tests and in other tools).
    package static func beginEnding() {
        let signalled = state.withLock { state -> Bool in
            guard state.installed else { return false }
            if case .signalEnding = state.stage { return true }
            state.stage = .programEnding  // a second call (a failure after the result) changes nothing
            return false
        }
        // The handler is writing its lines and will `_exit` in a moment.
        while signalled { sleep(1) }
    }

    /// Whether a signal's ending has begun: its lines are written (or being written) and the
    /// process exits in a moment. A program's output written meanwhile would follow them (a demo
    /// still narrating during `desktop --web`'s and `demo --web`'s settle), so callers drop it.
    package static var isSignalEnding: Bool {
        state.withLock { state in
            if case .signalEnding = state.stage { return true }
            return false
        }
    }

    /// Called by a program that has written its final lines and now only lingers (`demo --web`
    /// keeps its page up for late readers): from now on a signal ends the process at once with
    /// `status`, the program's own, writing nothing. Does nothing where
    /// ``endOnSignals(output:settle:_:)`` was not called, or while a signal's ending runs.
    package static func exitOnSignals(status: Int32) {
        state.withLock { state in
            guard state.installed else { return }
            if case .signalEnding = state.stage { return }
            state.stage = .lingering(status)
        }
    }

    /// The ending of `desktop` and `phone`: an interruption is a failure like any other.
    package static func failure(json: Bool, flow: String?) -> @Sendable (String, Int32) -> Ending {
        { signal, status in ending("interrupted by \(signal)", status: status, json: json, flow: flow) }
    }

    /// An interruption's lines: `error: MESSAGE` and, with `json`, an `error` event of kind
    /// `interrupted` (after `flow`, if any) as the last stdout line.
    package static func ending(_ message: String, status: Int32, json: Bool, flow: String? = nil) -> Ending {
        var event: String? = nil
        if json {
            var members = flow.map { [("flow", JSONLine.Value.string($0))] } ?? []
            members += JSONLine.errorMembers(kind: "interrupted", exitCode: status, message: message)
            event = JSONLine(event: "error", members).text
        }
        return Ending(standardOutput: event, standardError: "error: \(message)", status: status)
    }
}
