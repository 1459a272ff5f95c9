/// Where a started desktop can be reached: handed to `onReady` once the QR code is shown.
public struct DesktopEndpoints: Sendable, Hashable {
    /// The `FIDO:/` URL in the QR code.
    public var url: String
    /// The relay (`ws://HOST:PORT`).
    public var relayURL: String
    /// The proximity scanner (`udp://HOST:PORT`).
    public var proximityURL: String
    /// The challenge the relying party issued.
    public var challenge: [UInt8]
    /// The terminal art of the QR code (as printed without `--json`).
    public var terminalArt: String
}
