/// The command byte that starts every CTAP2 request (CTAP 2.2 §6 "Authenticator API").
/// Unknown bytes are kept as they are, so an authenticator can answer `CTAP1_ERR_INVALID_COMMAND`.
public struct CTAP2Command: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The command byte.
    public let rawValue: UInt8

    /// Wraps a command byte.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// `authenticatorMakeCredential` (0x01).
    public static let makeCredential = Self(rawValue: 0x01)
    /// `authenticatorGetAssertion` (0x02).
    public static let getAssertion = Self(rawValue: 0x02)
    /// `authenticatorGetInfo` (0x04), no parameters.
    public static let getInfo = Self(rawValue: 0x04)
    /// `authenticatorClientPIN` (0x06).
    public static let clientPIN = Self(rawValue: 0x06)
    /// `authenticatorReset` (0x07).
    public static let reset = Self(rawValue: 0x07)
    /// `authenticatorGetNextAssertion` (0x08).
    public static let getNextAssertion = Self(rawValue: 0x08)
    /// `authenticatorCredentialManagement` (0x0A).
    public static let credentialManagement = Self(rawValue: 0x0A)
    /// `authenticatorSelection` (0x0B), no parameters. A Chromium phone ends the transaction on it.
    public static let selection = Self(rawValue: 0x0B)
    /// `authenticatorLargeBlobs` (0x0C).
    public static let largeBlobs = Self(rawValue: 0x0C)
    /// `authenticatorConfig` (0x0D).
    public static let config = Self(rawValue: 0x0D)

    /// The specification's command name (`authenticatorGetAssertion`), or `command 0xNN`.
    public var description: String {
        switch self {
        case .makeCredential: return "authenticatorMakeCredential"
        case .getAssertion: return "authenticatorGetAssertion"
        case .getInfo: return "authenticatorGetInfo"
        case .clientPIN: return "authenticatorClientPIN"
        case .reset: return "authenticatorReset"
        case .getNextAssertion: return "authenticatorGetNextAssertion"
        case .credentialManagement: return "authenticatorCredentialManagement"
        case .selection: return "authenticatorSelection"
        case .largeBlobs: return "authenticatorLargeBlobs"
        case .config: return "authenticatorConfig"
        default: return "command 0x\(Hex.encode([rawValue]))"
        }
    }
}
