import ArgumentParser
import Foundation
import HybridCore
import HybridSim
import Logging
import Synchronization

/// `hybrid-sim phone`: the phone that scans the desktop's QR code and answers as an authenticator.
/// Parses arguments and calls ``PhoneProgram``; see Docs/CLI.md.
struct PhoneCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "phone",
        abstract: "Be the phone: scan the desktop's QR code, create or use a passkey, answer through the tunnel.",
        discussion: """
            Reads the QR code (--qr with the FIDO:/ text, or --scan with a PNG, a PGM or a text copy of \
            the terminal art; with neither, the FIDO:/ text in HYBRID_SIM_QR, which other users cannot \
            read as they can a command line), opens a tunnel at the relay, advertises to the desktop's proximity \
            scanner, answers its makeCredential or getAssertion with the passkeys in --store (saving new \
            and updated ones) and exits 0 once the desktop has closed the transaction. Progress goes to \
            stderr. Exit status: 0 answered, 1 other failure, 2 bad input (QR code, store), 3 timeout \
            (the desktop did not connect or send its request in time, no account was chosen in time, --listen-timeout), \
            4 refused (--deny, no passkey, no account chosen), \
            6 relay or network, 7 protocol error, 64 bad command line, 130/143 interrupted (SIGINT/SIGTERM; a --listen phone exits 0). --listen instead answers \
            desktops that contact this phone through a link (no QR code); --unlink revokes every \
            link (Docs/LINKING.md). See Docs/CLI.md.

            Examples (the desktop, `hybrid-sim desktop`, runs in another terminal):
              hybrid-sim phone --scan qr.txt                # the code, saved, or a PNG
              hybrid-sim phone --qr FIDO:/…                 # the line under the code
              HYBRID_SIM_QR=FIDO:/… hybrid-sim phone        # the same, off the command line (ps)
              hybrid-sim phone --scan qr.txt --account bob  # of several passkeys
              hybrid-sim phone --listen                     # answer linked desktops
            """
    )

    @Option(
        help: ArgumentHelp(
            "The FIDO:/ URL printed under the desktop's QR code (other users see a command line, in ps; HYBRID_SIM_QR=FIDO:/… instead keeps it off).",
            valueName: "FIDO:/…"))
    var qr: String?

    @Option(
        help: ArgumentHelp(
            "Decode the QR code from a PNG, a PGM, or a text file holding the terminal art (e.g. tmux capture-pane -p).",
            valueName: "file"
        )
    )
    var scan: String?

    @Option(
        help: ArgumentHelp(
            "The relay the desktop uses (with --unlink: a relay to tell of the revocation at once; none unless given). (default: \(ProgramDefaults.relayURL))",
            valueName: "ws://host:port"))
    var relay: String?

    @Option(
        help: ArgumentHelp(
            "The desktop's proximity scanner. (default: \(ProgramDefaults.proximityURL))", valueName: "udp://host:port"))
    var proximity: String?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Simulated signal strength of the adverts, in dBm (the desktop accepts ≥ -70 by default). (default: \(ProgramDefaults.rssi))",
            valueName: "dBm"
        )
    )
    var rssi: Int?

    @Option(
        help: ArgumentHelp(
            "Passkey store. (default: $HYBRID_SIM_HOME/passkeys.json, HYBRID_SIM_HOME defaulting to ~/.hybrid-sim)",
            valueName: "file"
        )
    )
    var store: String?

    @Option(
        help: ArgumentHelp(
            "Account to sign in with when several passkeys match (user name or display name). Without it the phone asks on a terminal, and fails listing the accounts otherwise.",
            valueName: "name"
        )
    )
    var account: String?

    @Flag(help: "The user refuses: answer CTAP2_ERR_OPERATION_DENIED. (default: off)")
    var deny = false

    @Option(
        help: ArgumentHelp(
            "Attestation for new passkeys: none, packed (self attestation), or packed-x5c (full attestation: a certificate under the simulated root CA). (default: none)",
            valueName: "none|packed|packed-x5c"
        )
    )
    var attestation: AttestationKind?

    @Option(
        help: ArgumentHelp(
            "Write the simulated attestation root CA (PEM) that packed-x5c certificates chain to, for a relying party's --attestation-roots; it is the same in every run. Alone: write it and exit.",
            valueName: "file"
        )
    )
    var attestationRootOut: String?

    @Flag(
        help:
            "Print one JSON event per line on stdout: qr, connected, advert, handshake, request, response, closedAfterResponse, then result or error; with --listen also listening, unreachable, contactRevoked, contact, refused and answered, and with --unlink unlinked, every one of these with \"flow\":\"linked\" (Docs/CLI.md). (default: off)"
    )
    var json = false

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Seconds to wait for the desktop's handshake and (less 2 s, or a tenth) for the user's decision; the relay connection and each later message of the desktop wait at most 10 s of it. (default: \(Int(ProgramDefaults.timeoutSeconds)))",
            valueName: "seconds"
        )
    )
    var timeout: Double?

    @OptionGroup var session: SessionDiagnosticsOptions

    @Flag(
        help:
            "Linked phone: keep a push channel open on --relay and answer desktops that contact this phone through a stored link (no QR code). (default: off)"
    )
    var listen = false

    @Option(parsing: .unconditional, help: ArgumentHelp("With --listen: exit 0 after this many answered contact requests.", valueName: "n"))
    var count: Int?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "With --listen: give up (exit 3) after this many seconds without reaching --count. (default: no limit)",
            valueName: "seconds"))
    var listenTimeout: Double?

    @Option(
        help: ArgumentHelp(
            "Break the protocol on purpose at one step, to test a desktop's error handling (QR flow; Docs/FAULTS.md).",
            valueName: "step"
        )
    )
    var misbehave: PhoneMisbehaviour?

    @Flag(help: "Revoke this phone's contact ID: every desktop's link answers 410 from then on. (default: off)")
    var unlink = false

    /// `--attestation-root-out FILE` and no QR flow (`--qr`, `--scan`, a code in `HYBRID_SIM_QR`),
    /// `--listen` or `--unlink`: only write the root.
    private var writesRootOnly: Bool {
        attestationRootOut != nil && qr == nil && scan == nil && !Self.qrInEnvironment && !listen && !unlink
    }

    func validate() throws {
        if let attestationRootOut, attestationRootOut.isEmpty { throw ValidationError("--attestation-root-out needs a file name") }
        if writesRootOnly {
            // Nothing else runs: a flag of a transaction given with it would be ignored without a word.
            let given = [
                ("--relay", relay != nil), ("--proximity", proximity != nil), ("--rssi", rssi != nil), ("--store", store != nil),
                ("--account", account != nil), ("--deny", deny), ("--attestation", attestation != nil), ("--json", json),
                ("--timeout", timeout != nil), ("--keylog", session.keylog != nil), ("--count", count != nil),
                ("--listen-timeout", listenTimeout != nil), ("--misbehave", misbehave != nil),
            ].filter(\.1).map(\.0)
            guard given.isEmpty else {
                let (flags, verb, pronoun) = (given.joined(separator: ", "), given.count == 1 ? "belongs" : "belong", given.count == 1 ? "it" : "them")
                throw ValidationError(
                    "--attestation-root-out alone only writes the root; \(flags) \(verb) to a transaction "
                        + "(--qr, --scan, \(PhoneConfiguration.qrVariable), --listen or --unlink): drop \(pronoun), or give the transaction")
            }
            return
        }
        // Before anything converts them to a Duration (which traps on NaN and infinities).
        try checkSeconds(timeout, flag: "--timeout")
        try checkSeconds(listenTimeout, flag: "--listen-timeout", maximum: 86_400)
        if listen || unlink {
            guard qr == nil, scan == nil else { throw ValidationError("--listen and --unlink take no QR code (--qr, --scan)") }
            guard misbehave == nil else { throw ValidationError("--misbehave applies to the QR flow, not to --listen or --unlink") }
            guard !(listen && unlink) else { throw ValidationError("--listen and --unlink cannot be combined") }
            if let count, count < 1 { throw ValidationError("--count must be at least 1") }
            if unlink {
                guard count == nil, listenTimeout == nil else { throw ValidationError("--count and --listen-timeout need --listen") }
                guard account == nil, !deny else {
                    throw ValidationError("--account and --deny answer requests; --unlink answers none")
                }
                guard proximity == nil, rssi == nil, timeout == nil, attestation == nil, session.keylog == nil else {
                    throw ValidationError(
                        "--proximity, --rssi, --timeout, --attestation and --keylog apply to transactions; --unlink runs none")
                }
                // The relay it tells and the store, checked as everywhere else (a bad one is a usage error, 64).
                do {
                    if let relay { try ProgramChecks.relayURL(relay) }
                    try ProgramChecks.storePath(store, flag: "--store", fileName: PasskeyStore.fileName)
                } catch {
                    throw ValidationError(error.message)
                }
                return
            }
        } else {
            guard count == nil, listenTimeout == nil else { throw ValidationError("--count and --listen-timeout need --listen") }
            switch (qr, scan) {
            case (nil, nil) where !Self.qrInEnvironment:
                throw ValidationError(
                    "give the QR code with --qr 'FIDO:/…', --scan FILE or \(PhoneConfiguration.qrVariable)=FIDO:/… (or --listen, --unlink)")
            case (.some, .some): throw ValidationError("--qr and --scan cannot be combined")
            default: break
            }
        }
        // The QR flow and every transaction of --listen: --timeout, --rssi, --proximity, --relay.
        do {
            try makeConfiguration().validate()
        } catch {
            throw ValidationError(error.message)
        }
    }

    func run() async throws {
        if let attestationRootOut {
            do {
                try PhoneAttestationRoot.write(to: attestationRootOut)
            } catch {
                throw errorLine(error.message, status: error.exitCode)
            }
            progressLine("wrote the simulated attestation root CA to \(attestationRootOut) (for a relying party's --attestation-roots)")
            if writesRootOnly { return }
        }
        try DescriptorCheck.requireTunnel(holder: "phone", json: json)
        var configuration = makeConfiguration()
        if unlink {
            // Ended by a signal while it tells the relay (up to 3 s), it says whether the revocation was saved.
            let saved = Mutex(false)
            let json = configuration.json
            Interruption.endOnSignals { signal, status in
                Interruption.ending(
                    "interrupted by \(signal)" + (saved.withLock { $0 }
                        ? " (the revocation was saved; the relay learns it from this phone's next --listen)" : ""),
                    status: status, json: json, flow: "linked")
            }
            let status = await PhoneListenProgram.unlink(
                configuration, tellingRelay: relay, output: .standard, onSaved: { saved.withLock { $0 = true } })
            if status != 0 { throw ExitCode(status) }
            return
        }
        configuration.chooseAccount = PhoneProgram.terminalAccountChooser(
            output: .standard,
            timeout: configuration.timeout
        )
        if listen {
            let limit = listenTimeout.map { Duration.milliseconds(Int64(($0 * 1000).rounded())) }
            var listening = PhoneListenProgram.Configuration(phone: configuration, count: count, limit: limit)
            let answered = Mutex(0)
            listening.onAnswered = { answered.withLock { $0 += 1 } }
            Interruption.endOnSignals(
                PhoneListenProgram.signalEnding(json: configuration.json, answered: { answered.withLock { $0 } }))
            let status = await PhoneListenProgram.main(listening, output: .standard)
            if status != 0 { throw ExitCode(status) }
            return
        }
        Interruption.endOnSignals(Interruption.failure(json: configuration.json, flow: nil))
        let status = await PhoneProgram.main(configuration, output: .standard)
        if status != 0 { throw ExitCode(status) }
    }

    /// Whether `HYBRID_SIM_QR` holds something (it is read only when neither `--qr` nor `--scan` is given).
    private static var qrInEnvironment: Bool {
        !(ProcessInfo.processInfo.environment[PhoneConfiguration.qrVariable] ?? "").isEmpty
    }

    private func makeConfiguration() -> PhoneConfiguration {
        // Neither --qr nor --scan: the code in HYBRID_SIM_QR, off the command line that `ps` shows
        // every user (the desktop's `phone command:` line sets it); the flags win over it.
        let source: PhoneConfiguration.QRSource =
            scan.map { .file($0) } ?? qr.map { .url($0) } ?? (listen || unlink ? .url("-") : .environment(PhoneConfiguration.qrVariable))
        var configuration = PhoneConfiguration(qr: source)
        configuration.relayURL = relay ?? ProgramDefaults.relayURL
        configuration.proximityURL = proximity ?? ProgramDefaults.proximityURL
        configuration.rssi = rssi ?? ProgramDefaults.rssi
        configuration.storePath = store
        configuration.account = account
        configuration.deny = deny
        configuration.attestation = (attestation ?? .none).attestation
        configuration.json = json
        configuration.keyLogPath = session.keylog
        configuration.misbehave = misbehave
        configuration.timeout = .milliseconds(Int64(((timeout ?? ProgramDefaults.timeoutSeconds) * 1000).rounded()))
        configuration.logger = CommandLogging.logger(label: "hybrid-sim.phone", level: session.logLevel)
        return configuration
    }
}

extension PhoneMisbehaviour: ExpressibleByArgument {}

/// `--attestation none|packed|packed-x5c`.
enum AttestationKind: String, ExpressibleByArgument, CaseIterable {
    case none, packed
    case packedX5c = "packed-x5c"

    var attestation: SoftwareAuthenticator.Attestation {
        switch self {
        case .none: return .none
        case .packed: return .packedSelf
        case .packedX5c: return .packedFull
        }
    }
}
