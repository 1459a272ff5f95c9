import HybridRuntime

/// The defaults `hybrid-sim desktop` and `hybrid-sim phone` agree on, so that both commands work
/// without flags on one machine (documented in Docs/CLI.md).
public enum ProgramDefaults {
    /// TCP port of the desktop's embedded relay, and the port in the phone's default `--relay`.
    public static let relayPort = 47001
    /// The phone's default `--relay`.
    public static let relayURL = "ws://127.0.0.1:\(relayPort)"
    /// UDP port of the desktop's proximity scanner (the CLI contract's default, Docs/CLI.md).
    public static let proximityPort = ProximityDefaults.scannerPort
    /// The phone's default `--proximity`.
    public static let proximityURL = "udp://127.0.0.1:\(proximityPort)"
    /// Weakest RSSI the desktop accepts, dBm.
    public static let minRSSI = Int(ProximityDefaults.minRSSI)
    /// RSSI the phone claims, dBm.
    public static let rssi = Int(ProximityDefaults.rssi)
    /// How long either side waits for the other, seconds.
    public static let timeoutSeconds = 120.0
    /// The built-in relying party's ID.
    public static let rpId = "example.com"
    /// The account the built-in relying party registers.
    public static let userName = "alice"
    /// The longest account name `--user` and `rp` take, in UTF-8 bytes. WebAuthn sets no maximum
    /// (64 bytes is the least an authenticator must keep); this bounds the stores' lines, and
    /// leaves room for long and non-Latin names (30 Devanagari characters are 84 bytes).
    public static let maximumUserNameBytes = 1024
    /// Longest `--timeout` accepted, seconds.
    public static let maximumTimeoutSeconds = 3600.0
}
