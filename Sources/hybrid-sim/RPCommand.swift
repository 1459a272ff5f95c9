import ArgumentParser
import Foundation
import HybridRuntime
import HybridSim

/// `hybrid-sim rp`: a relying-party server on loopback following a profile. See Docs/RELYING_PARTY.md.
struct RPCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rp",
        abstract: "Serve a relying party's WebAuthn endpoints on loopback (for desktop --rp-url).",
        discussion: """
            Serves the endpoints of a profile (simplewebauthn, py_webauthn, hanko, okta, or a profile \
            JSON file) on http://127.0.0.1:PORT: it issues options with fresh challenges and verifies \
            the results it is sent (client data, RP ID hash, flags, attestation, signature, counter), \
            keeping credentials in a store. When ready it prints one line on stdout with the URL; one \
            line per verdict goes to stderr, and one per refused request (at most 2 a second after a \
            burst). Only requests addressed to it (Host 127.0.0.1:PORT, localhost:PORT or [::1]:PORT) \
            and not sent by a page in a browser (an Origin other than its own, a Sec-Fetch-Site other \
            than same-origin or none) are served. \
            Stops on SIGINT or SIGTERM. See Docs/RELYING_PARTY.md.
            """
    )

    @Option(help: ArgumentHelp("Built-in profile name or profile JSON file.", valueName: "name|file"))
    var profile: String

    @Option(parsing: .unconditional, help: ArgumentHelp("TCP port on 127.0.0.1; 0 picks a free one.", valueName: "n"))
    var port = RelyingPartyServerProgram.defaultPort

    @Option(help: ArgumentHelp("Relying party ID.", valueName: "id"))
    var rpId = ProgramDefaults.rpId

    @Option(help: ArgumentHelp("Origin results must carry. (default: https://<rp-id>)", valueName: "url"))
    var origin: String?

    @Option(
        help: ArgumentHelp(
            "Credential store. (default: $HYBRID_SIM_HOME/rp-server-credentials.json)", valueName: "file"))
    var store: String?

    @Option(
        help: ArgumentHelp(
            "PEM file of root certificates a packed full attestation (x5c) must chain to; without it a verified chain is accepted, trust not established.",
            valueName: "file"
        )
    )
    var attestationRoots: String?

    @Flag(help: "Print the profile's JSON (to copy and edit) and exit.")
    var printProfile = false

    func validate() throws {
        // Values on the command line are usage errors (64), as desktop's are; a profile that does
        // not load, or a store, stays bad input (2) in run().
        var configuration = RelyingPartyServerProgram.Configuration(profile: profile)
        configuration.port = port
        configuration.rpId = rpId
        configuration.origin = origin
        do {
            _ = try RelyingPartyServerProgram.checked(configuration)
            try ProgramChecks.storePath(store, flag: "--store", fileName: "rp-server-credentials.json")
        } catch {
            throw ValidationError(error.message)
        }
    }

    func run() async throws {
        if printProfile {
            do {
                let loaded = try RelyingPartyProfile.load(profile)
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                try printResult(String(decoding: try encoder.encode(loaded), as: UTF8.self))
                return
            } catch let failure as ProgramFailure {
                throw errorLine(failure.message, status: failure.exitCode)
            }
        }
        try DescriptorCheck.require(2, holder: "rp", need: "it needs 2 (a request answered while another waits)")
        var configuration = RelyingPartyServerProgram.Configuration(profile: profile)
        configuration.port = port
        configuration.rpId = rpId
        configuration.origin = origin
        configuration.storePath = store
        configuration.attestationRootsPath = attestationRoots
        let server: RelyingPartyHTTPServer
        let service: RelyingPartyService
        do {
            (server, service) = try await RelyingPartyServerProgram.start(configuration) { line in
                // A verdict quotes the client's text (a user name): one line stays one line.
                progressLine("rp: \(PeerText.printable(line, limit: PeerText.lineLimit))")
            }
        } catch {
            throw errorLine(error.message, status: error.exitCode)
        }
        // Caught from here on: while the profile loads (a pipe may take up to FileReader's quiet
        // limit) Ctrl-C keeps its default and ends the program at once.
        let signals = TerminationSignals()
        let origin = await service.relyingParty.origin
        printStatus("hybrid-sim rp (\(profile)) listening on http://127.0.0.1:\(server.port) for \(rpId) (origin \(origin))")
        let received = await signals.wait()
        progressLine("rp: stopped by \(SignalRouter.name(received))")
        await server.stop()
    }
}
