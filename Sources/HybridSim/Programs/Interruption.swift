import Dispatch
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// SIGINT and SIGTERM end `desktop` and `phone` the way every other failure does: one final
/// `error: interrupted by SIGINT` line on stderr and, with `--json`, an `error` event as the last
/// stdout line (`"kind":"interrupted"`), then exit status 128 + the signal (130, 143), as a shell
/// reports a process a signal ended. Without this the process died with no final line, and a
/// script reading `--json` saw neither `result` nor `error`.
///
/// The process exits at once (`_exit`, after the two lines): the peer learns from the relay that
/// this side's connection ended. Files the program already wrote stay (a `--qr-png`).
package enum Interruption {
    /// The signal sources, kept for the process's lifetime.
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []

    /// Replaces the default action of SIGINT and SIGTERM with the report above. Call once, early.
    package static func reportOnSignals(json: Bool, output: ProgramOutput = .standard) {
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                let status = 128 + number
                let message = "interrupted by \(number == SIGINT ? "SIGINT" : "SIGTERM")"
                if json {
                    output.standardOutput(
                        JSONLine(event: "error", [
                            ("kind", .string("interrupted")), ("exitCode", .int(Int(status))), ("message", .string(message)),
                        ]).text)
                }
                output.standardError("error: \(message)")
                _exit(status)
            }
            source.resume()
            sources.append(source)
        }
    }
}
