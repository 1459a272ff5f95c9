import ArgumentParser
import Foundation
import HybridSim

/// `hybrid-sim demo`: registration then sign-in in one terminal, narrated.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the whole hybrid ceremony in one terminal: an embedded relay, a desktop and a phone "
            + "(two child processes), registration then sign-in, every step narrated.")

    @Option(help: "Relying party ID (the origin is https://<rp-id>).")
    var rpId = "example.com"

    @Option(help: "The account to register.")
    var user = "alice"

    @Option(help: "Seconds each step may take before the demo gives up.")
    var timeout = 60

    @Option(help: "Directory for the demo's passkey and relying-party stores (default: a fresh temporary directory).")
    var home: String?

    func run() async throws {
        var configuration = DemoProgram.Configuration(executable: Self.executablePath())
        configuration.rpID = rpId
        configuration.user = user
        configuration.timeout = .seconds(max(1, timeout))
        configuration.home = home
        let code = await DemoProgram.main(configuration)
        if code != 0 { throw ExitCode(code) }
    }

    /// This binary, to start the desktop and the phone from.
    static func executablePath() -> String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }
}
