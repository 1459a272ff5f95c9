import ArgumentParser
import Foundation
import HybridFiles
import HybridRuntime
import HybridSim
import Logging

/// The `hybrid-sim` root command. Each subcommand lives in its own file and only parses
/// arguments before calling a library entry point.
@main
struct HybridSimCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hybrid-sim",
        abstract: "A byte-exact simulator of the FIDO CTAP 2.2 hybrid transport (caBLE v2).",
        version: HybridSimVersion.description,
        subcommands: [
            // Subcommands are registered here, one line each.
            DemoCommand.self,
            QRCommand.self,
            RelayCommand.self,
            RPCommand.self,
            DesktopCommand.self,
            PhoneCommand.self,
            BenchCommand.self,
            InspectCommand.self,
        ]
    )

    /// ArgumentParser's `main`, after making sure standard output and error are what they say
    /// (``StandardStream/claimClosedDescriptors()``: a command started with a closed stdout must
    /// not write its lines into the first socket it opens) and ignoring `SIGPIPE`: a reader of
    /// stdout that leaves early (`| grep -m1 FIDO:/`) is an `EPIPE` the stream handles, whether or
    /// not SwiftNIO (which ignores the signal too) has started yet.
    /// Ends the process before anything started: `line` straight to standard error (no stream,
    /// thread or descriptor of ours exists yet), exit 1.
    private static func refuseStart(_ line: String) -> Never {
        _ = line.withCString { write(2, $0, strlen($0)) }
        Foundation.exit(1)
    }

    static func main() async {
        // Before any thread allocates: under an address-space limit (ulimit -v) glibc's per-thread
        // arenas would reserve most of it (``AddressSpaceLimit``); below the floor nothing starts.
        AddressSpaceLimit.fitAllocator()
        if let limit = AddressSpaceLimit.current, limit < AddressSpaceLimit.startFloor {
            refuseStart(AddressSpaceLimit.belowFloorLine(limit))
        }
        // Before anything opens a descriptor (the signal pipe, Dispatch's and SwiftNIO's event
        // sources, standard error's writer): under a limit this small those trap, exit 132, before a
        // command's own check (``DescriptorCheck``) could say why.
        if let limit = DescriptorLimit.raiseToHard(), limit < DescriptorCheck.startFloor {
            refuseStart(
                "error: the open-file limit (ulimit -n) is \(limit); hybrid-sim needs at least "
                    + "\(DescriptorCheck.startFloor) to start: raise the limit (ulimit -n 1024)\n")
        }
        signal(SIGPIPE, SIG_IGN)
        StandardStream.claimClosedDescriptors()
        // Every swift-log logger, the demo's and the libraries' defaults included, writes through
        // standard error's queue (``CommandLogging``), never on the logging thread.
        LoggingSystem.bootstrap { StreamLogHandler(label: $0, stream: CommandLogging.QueuedStandardError()) }
        // Caught from here on (each signal's default action until a command routes it): no
        // moment where one is ignored and lost (``SignalRouter``).
        SignalRouter.install()
        do {
            var command = try parseAsRoot()
            if var command = command as? AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            // `--help` and `--version`: their text is the result, and standard output that cannot
            // take it (`>/dev/full`) is exit 1 with an `error:` line, as for `qr show`, not exit 0
            // having printed nothing (ArgumentParser's `print` does not look).
            let message = fullMessage(for: error)
            if exitCode(for: error) == .success, !message.isEmpty {
                do {
                    try printResult(message)
                } catch let failure {
                    StandardStream.error.drain()
                    exit(withError: failure)
                }
                exit()
            }
            // ArgumentParser writes its message itself: after the lines already queued.
            StandardStream.error.drain()
            exit(withError: error)
        }
    }
}
