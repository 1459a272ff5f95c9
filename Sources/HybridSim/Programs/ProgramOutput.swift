import Foundation
import HybridFiles

/// Where a program (``DesktopProgram``, ``PhoneProgram``) writes: one callback per stream, each
/// call one complete line (the callback adds the newline).
///
/// `hybrid-sim` uses ``standard``; tests and the demo capture the lines instead. Every line is
/// written with one `write(2)` call, so a reader of a pipe sees it at once (no stdio buffering).
public struct ProgramOutput: Sendable {
    /// Receives one line meant for standard output (results, QR code, `--json` events).
    public var standardOutput: @Sendable (String) -> Void
    /// Receives one line meant for standard error (progress and the final error line).
    public var standardError: @Sendable (String) -> Void

    /// Output to two callbacks.
    public init(
        standardOutput: @escaping @Sendable (String) -> Void,
        standardError: @escaping @Sendable (String) -> Void
    ) {
        self.standardOutput = standardOutput
        self.standardError = standardError
    }

    /// The process's stdout and stderr, unbuffered. A stream that cannot be written (its reader
    /// went away, a full disk) is dropped and the run goes on, with one note on stderr when stdout
    /// failed: `hybrid-sim desktop | grep -m1 FIDO:/` must not cost the sign-in (Docs/CLI.md).
    public static let standard = ProgramOutput(
        standardOutput: { line in StandardStream.outputLine(line) },
        standardError: { line in StandardStream.errorLine(line) }
    )

    /// Discards everything.
    public static let discarding = ProgramOutput(standardOutput: { _ in }, standardError: { _ in })
}
