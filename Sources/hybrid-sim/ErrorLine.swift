import ArgumentParser
import HybridFiles
import HybridSim

/// Prints the one `error: …` line that a command's runtime failure ends with, and returns the exit
/// status to throw. (ArgumentParser's own `Error: …` is for usage errors, exit 64.)
func errorLine(_ message: String, status: Int32) -> ExitCode {
    // The final line: a signal's ending that already began writes its own and this one waits.
    Interruption.beginEnding()
    StandardStream.errorLine("error: \(message)")
    return ExitCode(status)
}

/// Prints a command's result (`qr show`, `bench --json`, `inspect`) on standard output, followed by
/// a newline unless `newline` is `false`. The result is the command's purpose: standard output
/// that cannot take it (a full disk, a reader gone) fails the command, exit 1 with one `error:`
/// line, instead of exiting 0 having printed nothing.
func printResult(_ text: String, newline: Bool = true) throws {
    Interruption.beginEnding()
    StandardStream.output.write(newline ? text + "\n" : text)
    if let message = StandardStream.resultWritten() { throw errorLine(message, status: 1) }
}

/// A status line on standard output of a long-running command (`relay`, `rp`: "listening on …"):
/// a failure to write it is a note on standard error, and the service runs on.
func printStatus(_ line: String) {
    StandardStream.outputLine(line)
}

/// A progress line on standard error.
func progressLine(_ line: String) {
    StandardStream.errorLine(line)
}

/// A command's failure as its last output: with `--json`, an `error` event on stdout first (the
/// members of `desktop`'s and `phone`'s: `kind`, `exitCode`, `message`), so a script reading the
/// JSON learns why as well as the exit status; then the `error:` line on stderr.
func failureLine(_ message: String, kind: String, status: Int32, json: Bool) -> ExitCode {
    Interruption.beginEnding()
    if json {
        StandardStream.outputLine(JSONLine(event: "error", JSONLine.errorMembers(kind: kind, exitCode: status, message: message)).text)
    }
    return errorLine(message, status: status)
}

/// Runs a command's work: any failure but an `ExitCode` (already reported) is one `error:` line
/// and, with `--json`, an `error` event (``failureLine(_:kind:status:json:)``), exit 1, as every
/// other command ends; ArgumentParser would print `Error: …`.
func reportingFailures(json: Bool, _ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let exit as ExitCode {
        throw exit
    } catch {
        throw failureLine("\(error)", kind: "failed", status: 1, json: json)
    }
}

/// A number of seconds given for `flag`: more than 0 and at most `maximum` (which NaN and the
/// infinities are not), checked before anything converts it to a `Duration`, which traps on them.
/// The value is used in whole milliseconds, so one under half a millisecond, which would round to
/// none, is refused here saying so (it read "must be more than 0" for 0.0001).
func checkSeconds(_ seconds: Double?, flag: String, maximum: Double = ProgramDefaults.maximumTimeoutSeconds) throws {
    guard let seconds, !(seconds >= 0.0005 && seconds <= maximum) else { return }
    if seconds > 0 && seconds < 0.0005 {
        throw ValidationError("\(flag) \(seconds) rounds to 0 milliseconds (it is kept in whole milliseconds): give 0.001 seconds or more")
    }
    throw ValidationError("\(flag) must be more than 0 and at most \(Int(maximum)) seconds")
}
