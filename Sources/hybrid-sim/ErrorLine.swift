import ArgumentParser
import Foundation

/// Prints the one `error: …` line that a command's runtime failure ends with, and returns the exit
/// status to throw. (ArgumentParser's own `Error: …` is for usage errors, exit 64.)
func errorLine(_ message: String, status: Int32) -> ExitCode {
    FileHandle.standardError.write(Data("error: \(message)\n".utf8))
    return ExitCode(status)
}
