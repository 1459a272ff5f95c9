import ArgumentParser
import Logging

/// The options `desktop` and `phone` share to look inside a session: the key log and the runtime
/// log level.
struct SessionDiagnosticsOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Append each session's traffic keys and handshake hash to this file (for hybrid-sim inspect --keylog; like SSLKEYLOGFILE).",
            valueName: "file"
        )
    )
    var keylog: String?

    @Option(help: "Runtime log level on stderr.")
    var logLevel: Logger.Level = .warning
}
