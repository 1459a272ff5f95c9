import ArgumentParser
import HybridCore
import HybridFiles
import HybridRuntime
import HybridSim
import Logging

/// `hybrid-sim desktop`: the browser showing a QR code, and the relying party checking the answer.
/// Parses arguments and calls ``DesktopProgram``; see Docs/CLI.md.
struct DesktopCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "desktop",
        abstract:
            "Be the browser and the relying party: show a QR code, register or sign in with a phone, verify the result.",
        discussion: """
            Prints the QR code (Unicode half blocks) and then the FIDO:/ URL on stdout, waits for a \
            nearby phone (`hybrid-sim phone`) over the proximity stub, runs one makeCredential (mc) or \
            getAssertion (ga) through the tunnel, verifies the answer as the relying party and prints \
            the WebAuthn L3 PublicKeyCredential JSON on stdout. Progress goes to stderr, including a \
            ready-to-copy phone command line. Exit status: 0 verified, 1 other failure, 2 bad input \
            (options, store, settings), 3 no phone / timeout, 4 refused by the phone, 5 verification \
            failed, 6 relay or network, 7 protocol error, 8 linked phone revoked the link (--linked), \
            64 bad command line, 130/143 interrupted (SIGINT/SIGTERM). With --linked there is no QR code: the desktop contacts a phone linked \
            earlier with --link (Docs/LINKING.md). See Docs/CLI.md.

            Examples (paste the "phone command:" line it prints into a second terminal):
              hybrid-sim desktop --request mc --user alice   # register alice's passkey
              hybrid-sim desktop --request ga                # sign in with it
              hybrid-sim desktop --request ga > qr.txt       # the code, result in qr.txt
              hybrid-sim desktop --options opts.json --json  # your RP's options
            """
    )

    @Option(help: ArgumentHelp("mc (register a passkey) or ga (sign in).", valueName: "mc|ga"))
    var request: RequestKind = .ga

    @Option(help: ArgumentHelp("Relying party ID. (default: the --options' RP ID, else the --origin's host, else example.com)", valueName: "id"))
    var rpId: String?

    @Option(help: ArgumentHelp("Origin of the page asking. (default: https://<rp-id>)", valueName: "url"))
    var origin: String?

    @Option(
        help: ArgumentHelp(
            "Account: to register (mc), or whose stored credentials a sign-in (ga) allows; with --rp-url, the account name sent to the relying party. (default: alice for mc; any passkey for ga)",
            valueName: "name"
        )
    )
    var user: String?

    @Option(
        help: ArgumentHelp(
            "WebAuthn L3 options JSON from a real relying party (PublicKeyCredentialCreationOptionsJSON for mc, PublicKeyCredentialRequestOptionsJSON for ga); its challenge, rp, user, pubKeyCredParams, excludeCredentials, allowCredentials, residentKey (authenticatorSelection), userVerification, attestation and timeout are used (Docs/CLI.md).",
            valueName: "file"
        )
    )
    var options: String?

    @Option(
        help: ArgumentHelp(
            "How user.id is written in the options: base64url (WebAuthn JSON) or utf8 (a plain string, as Okta and ForgeRock send). (default: the profile's, else base64url)",
            valueName: "base64url|utf8"
        )
    )
    var userIdEncoding: UserIdEncoding?

    @Option(
        help: ArgumentHelp(
            "A relying party's base URL: fetch the options from it, post the result back and print its verdict (needs --rp-profile).",
            valueName: "url"
        )
    )
    var rpUrl: String?

    @Option(
        help: ArgumentHelp(
            "How --rp-url's API looks: simplewebauthn, py_webauthn, hanko, okta, or a profile JSON file (Docs/RELYING_PARTY.md).",
            valueName: "name|file"
        )
    )
    var rpProfile: String?

    @Option(
        help: ArgumentHelp(
            "An extra header for --rp-url, e.g. 'Authorization: Bearer TOKEN' (repeatable; replaces the profile's header of that name).",
            valueName: "'Name: value'"
        )
    )
    var rpHeader: [String] = []

    @Option(
        help: ArgumentHelp(
            "PEM file of CA certificates to trust for an https --rp-url, besides the system's (e.g. a development CA).",
            valueName: "file"
        )
    )
    var rpCa: String?

    @Option(
        help: ArgumentHelp(
            "PEM file of root certificates a packed full attestation (x5c) must chain to; without it a verified chain is accepted, trust not established.",
            valueName: "file"
        )
    )
    var attestationRoots: String?

    @Flag(help: .hidden)
    var debugTamperResult = false

    @Option(
        help: ArgumentHelp(
            "Relying-party credential store. (default: $HYBRID_SIM_HOME/rp-credentials.json, HYBRID_SIM_HOME defaulting to ~/.hybrid-sim)",
            valueName: "file"
        )
    )
    var rpStore: String?

    @Option(help: ArgumentHelp("Use this relay instead of the embedded one.", valueName: "ws://host:port"))
    var relay: String?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "TCP port of the embedded relay; 0 picks a free one. (default: 47001, or a free port if it is taken)",
            valueName: "n"
        )
    )
    var relayPort: Int?

    @Option(
        help: ArgumentHelp(
            "Break the protocol on purpose at one step, to test a phone's error handling (QR flow; Docs/FAULTS.md).",
            valueName: "step"
        )
    )
    var misbehave: DesktopMisbehaviour?

    @Option(
        name: .customLong("relay-fault"),
        help: ArgumentHelp(
            "Make the embedded relay inject this fault (repeatable; same syntax as hybrid-sim relay --fault, Docs/FAULTS.md). Not with --relay.",
            valueName: "spec"
        )
    )
    var relayFaults: [String] = []

    @Option(parsing: .unconditional, help: ArgumentHelp("Seed of the --relay-fault decisions (as relay --fault-seed).", valueName: "n"))
    var relayFaultSeed: UInt64?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "UDP port of the proximity scanner; 0 picks a free one. (default: 47002, or a free port if it is taken)",
            valueName: "n"
        )
    )
    var proximityPort: Int?

    @Option(parsing: .unconditional, help: ArgumentHelp("Weakest advert RSSI accepted, in dBm.", valueName: "dBm"))
    var minRssi: Int = ProgramDefaults.minRSSI

    @Option(help: ArgumentHelp("Also write the QR code as a PNG.", valueName: "file"))
    var qrPng: String?

    @Flag(help: "Draw the QR code for a dark-background terminal. (default: off)")
    var invert = false

    @Flag(
        help:
            "Print one JSON event per line on stdout instead of the QR art and the pretty JSON: qr, advert, connected, handshake, request, response, then result or error (also options, contact, linked and rpVerdict when those flags are used; Docs/CLI.md). (default: off)"
    )
    var json = false

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Seconds to wait for a nearby phone, and for its answer. (default: the options' timeout, else 120)",
            valueName: "seconds"
        )
    )
    var timeout: Double?

    @OptionGroup var session: SessionDiagnosticsOptions

    @Flag(
        help:
            "The QR code says this desktop can link (key 4); after a verified ceremony the phone's linking information is verified and stored in --links. (default: off)"
    )
    var link = false

    @Option(
        help: ArgumentHelp(
            "Linked phones. (default: links.json next to the relying-party store)", valueName: "file"))
    var links: String?

    @Option(
        help: ArgumentHelp(
            "Sign in or register through a stored link, with no QR code: the phone's name, or any when there is one link. Exit 8 when the phone revoked the link (410; the link is removed).",
            valueName: "name|any"))
    var linked: String?

    @Flag(help: "List the linked phones in --links (name, when linked, tunnel service) and exit; no network. (default: off)")
    var listLinks = false

    @Option(
        help: ArgumentHelp(
            "Remove the link to this phone (or all links) from --links and exit, with no network: this desktop stops contacting it; the phone keeps its side until it unlinks (phone --unlink).",
            valueName: "name|all"))
    var forget: String?

    func validate() throws {
        if listLinks || forget != nil {
            guard !(listLinks && forget != nil) else { throw ValidationError("--list-links and --forget cannot be combined") }
            let flag = listLinks ? "--list-links" : "--forget"
            guard linked == nil, !link, !web else { throw ValidationError("\(flag) runs no ceremony: it cannot be combined with --linked, --link or --web") }
            do {
                try ProgramChecks.storePath(rpStore, flag: "--rp-store", fileName: RelyingPartyStore.fileName)
                try ProgramChecks.storePath(links, flag: "--links", fileName: LinkStore.fileName)
            } catch {
                throw ValidationError(error.message)
            }
            return
        }
        if !web, webPort != nil { throw ValidationError("--web-port needs --web") }
        if relay != nil, relayPort != nil {
            throw ValidationError("--relay-port is for the embedded relay; it cannot be combined with --relay")
        }
        _ = try FaultOptions.relayFaults(relayFaults, seed: relayFaultSeed, flag: "--relay-fault")
        try checkSeconds(timeout, flag: "--timeout")
        let configuration = try makeConfiguration()
        do {
            try configuration.validate()
        } catch {
            throw ValidationError(error.message)
        }
    }

    @Flag(help: "Serve a local page that plays the website: QR code, live progress, result or error (implies --json on stdout). Its address holds a secret token: it is printed on stderr only.")
    var web = false

    @Option(parsing: .unconditional, help: ArgumentHelp("TCP port of the --web page on 127.0.0.1; 0 picks a free one. (default: 47003, or a free port when taken)", valueName: "port"))
    var webPort: Int?

    func run() async throws {
        if listLinks || forget != nil {
            let path = links ?? LinkStore.path(besideRPStore: rpStore ?? RelyingPartyStore.defaultPath())
            let status = forget.map { DesktopLinksProgram.forget($0, path: path, json: json) }
                ?? DesktopLinksProgram.list(path: path, json: json)
            if status != 0 { throw ExitCode(status) }
            return
        }
        try DescriptorCheck.requireTunnel(holder: "desktop", json: json || web)
        let configuration = try makeConfiguration()
        let ending = Interruption.failure(json: json || web, flow: configuration.eventFlow)  // --web implies --json
        if web {
            if let webPort, !(0...65535).contains(webPort) { throw ValidationError("--web-port must be 0…65535") }
            // Ctrl-C's error event goes to an open page too, which gets a moment to receive it.
            let events = DesktopWebProgram.announcingPages()
            Interruption.endOnSignals(
                output: DesktopWebProgram.interruptionOutput(events), settle: .milliseconds(300), ending)
            let status = await DesktopWebProgram.main(configuration, webPort: webPort, events: events)
            if status != 0 { throw ExitCode(status) }
            return
        }
        Interruption.endOnSignals(ending)
        let status = await DesktopProgram.main(configuration, output: .standard)
        if status != 0 { throw ExitCode(status) }
    }

    private func makeConfiguration() throws -> DesktopConfiguration {
        var configuration = DesktopConfiguration()
        configuration.request = request.requestType
        configuration.rpId = rpId
        // As a browser serializes it (no trailing slash); what is not an origin fails validation.
        configuration.origin = origin.map { WebOrigin.normalized($0) ?? $0 }
        configuration.userName = user
        configuration.optionsFile = options
        configuration.userIdEncoding = userIdEncoding
        configuration.rpURL = rpUrl
        configuration.rpProfile = rpProfile
        configuration.rpHeaders = rpHeader
        configuration.rpCA = rpCa
        configuration.attestationRootsPath = attestationRoots
        configuration.tamperWithResult = debugTamperResult
        configuration.rpStorePath = rpStore
        configuration.relay = relay.map { .external(url: $0) } ?? .embedded(port: relayPort)
        configuration.proximityPort = proximityPort
        configuration.misbehave = misbehave
        configuration.relayFaults = try FaultOptions.relayFaults(relayFaults, seed: relayFaultSeed, flag: "--relay-fault")
        configuration.minRSSI = minRssi
        configuration.qrPNGPath = qrPng
        configuration.invertQR = invert
        configuration.json = json
        configuration.keyLogPath = session.keylog
        configuration.link = link
        configuration.linksPath = links
        configuration.linked = linked
        configuration.timeout = timeout.map { .milliseconds(Int64(($0 * 1000).rounded())) }
        configuration.logger = CommandLogging.logger(label: "hybrid-sim.desktop", level: session.logLevel)
        return configuration
    }
}

extension UserIdEncoding: ExpressibleByArgument {}
extension DesktopMisbehaviour: ExpressibleByArgument {}

/// `--request mc|ga`.
enum RequestKind: String, ExpressibleByArgument, CaseIterable {
    case mc, ga

    var requestType: QRPayload.RequestType { self == .mc ? .makeCredential : .getAssertion }
}

/// The swift-log logger of the desktop, phone and relay commands: stderr at `--log-level`, in
/// swift-log's `StreamLogHandler` format, through the queued ``StandardStream/error`` (swift-log's
/// own standard-error stream writes on the logging thread: an event loop, when stderr is not read).
enum CommandLogging {
    static func logger(label: String, level: Logger.Level) -> Logger {
        var logger = Logger(label: label, factory: { StreamLogHandler(label: $0, stream: QueuedStandardError()) })
        logger.logLevel = level
        return logger
    }

    /// Log lines for ``StandardStream/error``'s queue.
    struct QueuedStandardError: TextOutputStream, Sendable {
        mutating func write(_ string: String) {
            StandardStream.error.write(string)
        }
    }
}

/// `--log-level trace|debug|info|notice|warning|error|critical`, checked once by the argument parser.
extension Logger.Level: @retroactive ExpressibleByArgument {}
