import ArgumentParser
import Foundation
import HybridSim

/// `hybrid-sim demo`: registration by QR code with linking, then two sign-ins through the link, in
/// one terminal (and with `--web` on one page), narrated.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the whole hybrid ceremony in one terminal: an embedded relay, a desktop and a phone "
            + "(child processes), registration by QR code with linking then two sign-ins through the link, every step "
            + "narrated; --web also tells it on a local page.")

    @Option(help: "Relying party ID (the origin is https://<rp-id>).")
    var rpId = "example.com"

    @Option(help: "The account to register.")
    var user = "alice"

    @Option(parsing: .unconditional, help: "Whole seconds each step may take before the demo gives up (passed on to both programs' --timeout).")
    var timeout = 60

    @Option(help: "Directory for the demo's passkey and relying-party stores, created (with its parents, mode 0700) if missing and kept afterwards (default: a fresh temporary directory, removed at the end).")
    var home: String?

    @Flag(help: "Also tell the whole demo on a local web page (its address, with the secret token it needs, is printed first).")
    var web = false

    @Flag(help: "Standard output: one JSON event per line (qr, credential for each ceremony, then result or error) instead of the QR code and the credentials as printed; the narration stays on standard error.")
    var json = false

    @Option(parsing: .unconditional, help: ArgumentHelp("Port of the --web page on 127.0.0.1; 0 picks a free one.", valueName: "n"))
    var webPort = 0

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("With --web: keep serving the page this long after the demo ended. (default: 30)", valueName: "seconds"))
    var webLinger: Int?

    @Option(parsing: .unconditional, help: ArgumentHelp("With --web: wait up to this long for a page to open before the demo starts, so it follows the demo from the first line (0: start at once).", valueName: "seconds"))
    var webWait = 0

    func validate() throws {
        try checkSeconds(Double(timeout), flag: "--timeout")
        // The desktop's own checks of the RP ID and the account, before any child is started.
        var desktop = DesktopConfiguration()
        desktop.request = .makeCredential
        desktop.rpId = rpId
        desktop.userName = user
        do {
            try desktop.validate()
        } catch {
            throw ValidationError(error.message)
        }
        guard (0...65535).contains(webPort) else { throw ValidationError("--web-port must be 0…65535") }
        guard (0...3600).contains(webLinger ?? 30) else { throw ValidationError("--web-linger must be 0...3600 seconds") }
        if !web, webLinger != nil { throw ValidationError("--web-linger needs --web") }
        guard (0...3600).contains(webWait) else { throw ValidationError("--web-wait must be 0...3600 seconds") }
        if !web, webPort != 0 { throw ValidationError("--web-port needs --web") }
        if !web, webWait != 0 { throw ValidationError("--web-wait needs --web") }
        if web, json { throw ValidationError("--json and --web cannot be combined (the page is built from the demo's plain output)") }
    }

    func run() async throws {
        try DescriptorCheck.requireTunnel(holder: "demo", json: json)
        var configuration = DemoProgram.Configuration(executable: Self.executablePath())
        configuration.rpID = rpId
        configuration.user = user
        configuration.timeout = .seconds(timeout)
        configuration.home = home
        configuration.json = json
        let code: Int32
        if web {
            // Ctrl-C's line goes to an open page too, which gets a moment to receive it.
            let events = DesktopWebProgram.announcingPages()
            let (output, ending) = DemoWebProgram.signalEnding(events: events)
            Interruption.endOnSignals(output: output, settle: .milliseconds(300), ending)
            code = await DemoWebProgram.main(
                configuration, webPort: webPort, waitForPage: .seconds(webWait), linger: .seconds(webLinger ?? 30), events: events)
        } else {
            Interruption.endOnSignals(DemoProgram.signalEnding(json: json))
            code = await DemoProgram.main(configuration)
        }
        if code != 0 { throw ExitCode(code) }
    }

    /// This binary, to start the desktop and the phone from.
    static func executablePath() -> String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }
}
