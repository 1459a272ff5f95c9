import Foundation

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

    /// The process's stdout and stderr, unbuffered.
    public static let standard = ProgramOutput(
        standardOutput: { line in FileHandle.standardOutput.write(Data((line + "\n").utf8)) },
        standardError: { line in FileHandle.standardError.write(Data((line + "\n").utf8)) }
    )

    /// Discards everything.
    public static let discarding = ProgramOutput(standardOutput: { _ in }, standardError: { _ in })
}
