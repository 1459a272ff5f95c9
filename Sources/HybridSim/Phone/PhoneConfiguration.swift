import Foundation
import HybridCore
import Logging

/// Picks one of several passkeys that match a sign-in, or `nil` to cancel. Runs while the desktop
/// waits, so it should answer promptly.
public typealias AccountChooser = @Sendable (_ rpId: String, _ accounts: [Passkey]) async -> Passkey?

/// Everything `hybrid-sim phone` can be told (Docs/CLI.md).
public struct PhoneConfiguration: Sendable {
    /// Where the QR code comes from.
    public enum QRSource: Sendable, Hashable {
        /// The `FIDO:/…` text itself (`--qr`).
        case url(String)
        /// A PNG, PGM or text capture of the terminal art (`--scan`), decoded with a real QR decoder.
        case file(String)
        /// The `FIDO:/…` text in this variable of ``PhoneConfiguration/environment``
        /// (``PhoneConfiguration/qrVariable`` from the command line): off the command line, which
        /// every user of the machine can read (`ps`), where a process's environment is its own user's.
        case environment(String)
    }

    /// The environment variable `hybrid-sim phone` reads the QR code from when neither `--qr` nor
    /// `--scan` is given (the desktop's `phone command:` line sets it).
    public static let qrVariable = "HYBRID_SIM_QR"

    /// The QR code to answer.
    public var qr: QRSource
    /// The tunnel service, `ws://HOST:PORT`. Default `ws://127.0.0.1:47001` (the desktop's embedded relay).
    public var relayURL = ProgramDefaults.relayURL
    /// The desktop's proximity scanner, `udp://HOST:PORT`. Default `udp://127.0.0.1:47002`.
    public var proximityURL = ProgramDefaults.proximityURL
    /// The RSSI the adverts claim, dBm. Default -45 (nearby).
    public var rssi = ProgramDefaults.rssi
    /// The passkey store; `nil`: ``PasskeyStore/defaultPath(environment:)``.
    public var storePath: String?
    /// Which account to sign in with when several passkeys match (user name or display name).
    public var account: String?
    /// The user refuses (CTAP2_ERR_OPERATION_DENIED).
    public var deny = false
    /// The attestation for new passkeys. Default `none`.
    public var attestation: SoftwareAuthenticator.Attestation = .none
    /// The authenticator's policy from `--deny` and `--attestation`: what answers requests, and
    /// whose AAGUID the getInfo of the post-handshake message names.
    var policy: SoftwareAuthenticator.Policy { SoftwareAuthenticator.Policy(deny: deny, attestation: attestation) }
    /// `--json`: events on stdout, one JSON object per line.
    public var json = false
    /// How long to wait for the desktop (its handshake after advertising, its request, its shutdown). Default 120 s.
    public var timeout: Duration = .seconds(ProgramDefaults.timeoutSeconds)
    /// `--keylog FILE`: append each session's traffic keys and handshake hash (`SessionKeys`).
    public var keyLogPath: String?
    /// `--misbehave STEP`: break the protocol on purpose at one step (Docs/FAULTS.md); QR flow only.
    public var misbehave: PhoneMisbehaviour?
    /// Asks the user when several passkeys match and no ``account`` is given; `nil` fails instead
    /// with the list of accounts. The CLI sets `PhoneProgram.terminalAccountChooser(output:)`.
    public var chooseAccount: AccountChooser?
    /// The environment (for `HYBRID_SIM_HOME`).
    public var environment: [String: String] = ProcessInfo.processInfo.environment
    /// Where the runtime (WebSocket, advertiser) logs. Default: nowhere.
    public var logger = Logger(label: "hybrid-sim.phone", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Answer the QR code from `qr` with the defaults.
    public init(qr: QRSource) {
        self.qr = qr
    }

    /// Checks what can be checked without reading files or the network.
    ///
    /// - Throws: ``ProgramFailure`` of kind ``ProgramFailure/Kind/badInput``.
    public func validate() throws(ProgramFailure) {
        func bad(_ message: String) -> ProgramFailure { ProgramFailure(.badInput, message) }
        switch qr {
        case .url(let text) where text.isEmpty: throw bad("--qr is empty")
        case .file(let path) where path.isEmpty: throw bad("--scan needs a file name")
        case .environment(let name) where (environment[name] ?? "").isEmpty: throw bad("\(name) is not set (or empty)")
        default: break
        }
        try ProgramChecks.storePath(storePath, flag: "--store", fileName: PasskeyStore.fileName)
        try ProgramChecks.relayURL(relayURL)
        try ProgramChecks.proximityURL(proximityURL)
        guard (-127...20).contains(rssi) else { throw bad("--rssi must be -127…20 dBm") }
        if let account, account.isEmpty { throw bad("--account is empty") }
        guard timeout > .zero, timeout <= .seconds(ProgramDefaults.maximumTimeoutSeconds) else {
            throw bad("--timeout must be more than 0 and at most \(Int(ProgramDefaults.maximumTimeoutSeconds)) seconds")
        }
    }
}
