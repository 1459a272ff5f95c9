import Foundation
import HybridCore
import HybridRuntime
import Logging

/// Everything `hybrid-sim desktop` can be told (Docs/CLI.md). `nil` means "the default", which for
/// some settings depends on others (the origin on the RP ID, the timeout on the options file).
public struct DesktopConfiguration: Sendable {
    /// Which tunnel service the desktop uses.
    public enum Relay: Sendable, Hashable {
        /// Start the relay in this process on `port`; `nil` tries ``ProgramDefaults/relayPort``
        /// and falls back to a free port (with a note) when it is taken; 0 always picks a free port.
        case embedded(port: Int?)
        /// Use a relay started elsewhere (`ws://HOST:PORT`, loopback).
        case external(url: String)
    }

    /// `mc` (register) or `ga` (sign in). Default `ga`.
    public var request: QRPayload.RequestType = .getAssertion
    /// The relying party ID; `nil`: the options' RP ID, else ``ProgramDefaults/rpId``.
    public var rpId: String?
    /// The web origin the "page" runs on; `nil`: `https://<rp id>`.
    public var origin: String?
    /// The account to register (`mc` with the built-in relying party only); `nil`: `alice`.
    public var userName: String?
    /// A WebAuthn L3 options JSON file from a real relying party, used instead of the built-in one's.
    public var optionsFile: String?
    /// How `user.id` is written in `--options` / the RP's options (`--user-id-encoding`); `nil`: the
    /// profile's, else base64url.
    public var userIdEncoding: UserIdEncoding?
    /// A relying party's base URL (`--rp-url`): options are fetched from it and the result posted back.
    public var rpURL: String?
    /// The profile `--rp-url` follows (`--rp-profile NAME|FILE`).
    public var rpProfile: String?
    /// Extra headers for the relying party (`--rp-header 'Name: value'`).
    public var rpHeaders: [String] = []
    /// PEM CA certificates trusted for an https `--rp-url`, besides the system's (`--rp-ca FILE`).
    public var rpCA: String?
    /// `--attestation-roots FILE`: PEM roots a packed full attestation (`x5c`) must chain to;
    /// `nil` accepts a verified chain without establishing trust.
    public var attestationRootsPath: String?
    /// Test aid (`--debug-tamper-result`): corrupt the result before posting it to `--rp-url`.
    public var tamperWithResult = false
    /// The relying-party store; `nil`: ``RelyingPartyStore/defaultPath(environment:)``.
    public var rpStorePath: String?
    /// The tunnel service. Default: embedded on port 47001 (or a free one).
    public var relay: Relay = .embedded(port: nil)
    /// `--misbehave STEP`: break the protocol on purpose at one step (Docs/FAULTS.md); QR flow only.
    public var misbehave: DesktopMisbehaviour?
    /// `--relay-fault`: faults the embedded relay injects (Docs/FAULTS.md); ignored with an external relay.
    public var relayFaults = RelayFaults()
    /// UDP port of the proximity scanner; `nil`: 47002, or a free one (with a note) when taken; 0: a free one.
    public var proximityPort: Int?
    /// Weakest RSSI (dBm) an advert may have. Default -70.
    public var minRSSI: Int = ProgramDefaults.minRSSI
    /// Also write the QR code as a PNG here.
    public var qrPNGPath: String?
    /// Draw the terminal QR code for a dark background.
    public var invertQR = false
    /// `--json`: events on stdout, one JSON object per line, instead of the QR art and pretty JSON.
    public var json = false
    /// `--link`: the QR code says the desktop can link; verified linking information is stored.
    public var link = false
    /// `--links FILE`: the linked phones; `nil`: `links.json` next to the relying-party store.
    public var linksPath: String?
    /// `--linked NAME|any`: sign in or register through a stored link, with no QR code.
    public var linked: String?

    /// The `flow` member of this run's `--json` events: `linked`, `qr-link`, or none for a plain QR run.
    package var eventFlow: String? { linked != nil ? "linked" : link ? "qr-link" : nil }

    /// How long to wait for a nearby phone, and for its answer; `nil`: the options' `timeout`, else 120 s.
    public var timeout: Duration?
    /// `--keylog FILE`: append each session's traffic keys and handshake hash (`SessionKeys`).
    public var keyLogPath: String?
    /// The environment (for `HYBRID_SIM_HOME`).
    public var environment: [String: String] = ProcessInfo.processInfo.environment
    /// Where the runtime (relay, scanner, WebSocket) logs. Default: nowhere.
    public var logger = Logger(label: "hybrid-sim.desktop", factory: { _ in SwiftLogNoOpLogHandler() })

    /// The defaults.
    public init() {}

    /// Checks what can be checked without the network; the only file read is the PEM of
    /// `--rp-ca` (or `SSL_CERT_FILE`) with an https `--rp-url`, so that a bad one is a usage error.
    ///
    /// - Throws: ``ProgramFailure`` of kind ``ProgramFailure/Kind/badInput``.
    public func validate() throws(ProgramFailure) {
        func bad(_ message: String) -> ProgramFailure { ProgramFailure(.badInput, message) }
        if let rpId, !WebOrigin.isPlausibleHost(rpId) {
            throw bad("--rp-id \(rpId) is not a host name such as example.com")
        }
        if let origin, WebOrigin.normalized(origin) != origin {
            // The command normalizes what it is given (`https://example.com/` → `https://example.com`).
            throw bad("--origin \(origin) is not a web origin such as https://example.com (scheme and host, no path or query)")
        }
        if let origin, let problem = WebOrigin.trailingDotProblem(origin) { throw bad(problem) }
        if let userName, userName.isEmpty || userName.utf8.count > ProgramDefaults.maximumUserNameBytes {
            throw bad("--user must be 1…\(ProgramDefaults.maximumUserNameBytes) bytes of UTF-8")
        }
        if userName != nil, optionsFile != nil {
            throw bad("--user cannot be combined with --options: the options name the user")
        }
        try ProgramChecks.storePath(rpStorePath, flag: "--rp-store", fileName: RelyingPartyStore.fileName)
        try ProgramChecks.storePath(linksPath, flag: "--links", fileName: LinkStore.fileName)
        try validateRelyingPartyLink()
        if case .embedded(let port?) = relay, !(0...65535).contains(port) {
            throw bad("--relay-port must be 0…65535")
        }
        if case .external(let url) = relay {
            try ProgramChecks.relayURL(url)
            if relayFaults.isEnabled {
                throw bad("--relay-fault is for the embedded relay; with --relay, give the faults to hybrid-sim relay --fault")
            }
        }
        if let proximityPort, !(0...65535).contains(proximityPort) {
            throw bad("--proximity-port must be 0…65535")
        }
        guard (-127...20).contains(minRSSI) else { throw bad("--min-rssi must be -127…20 dBm") }
        if let linked {
            if link { throw bad("--link and --linked cannot be combined (--linked uses an existing link)") }
            if linked.isEmpty { throw bad("--linked needs a phone name or any") }
            if qrPNGPath != nil { throw bad("--qr-png does not apply to --linked (there is no QR code)") }
            if misbehave != nil { throw bad("--misbehave applies to the QR flow, not to --linked") }
            if proximityPort == 0 {
                // A listening phone advertises where its --proximity says, fixed when it started.
                throw bad("--linked takes no --proximity-port 0: the listening phone advertises to the --proximity it was "
                    + "started with (default udp://127.0.0.1:\(ProgramDefaults.proximityPort)), not to a port picked now; give that port")
            }
        }
        if let timeout {
            guard timeout > .zero, timeout <= .seconds(ProgramDefaults.maximumTimeoutSeconds) else {
                throw bad(
                    "--timeout must be more than 0 and at most \(Int(ProgramDefaults.maximumTimeoutSeconds)) seconds"
                )
            }
        }
    }
}
