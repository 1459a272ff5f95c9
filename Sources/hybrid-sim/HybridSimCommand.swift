import ArgumentParser
import HybridSim

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
}
