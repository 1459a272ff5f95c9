/// The flags byte of authenticator data (WebAuthn §6.1 "Authenticator Data").
/// Bits 1 and 5 are reserved and kept as they are.
public struct AuthenticatorDataFlags: OptionSet, Hashable, Sendable, CustomStringConvertible {
    /// The flags byte.
    public let rawValue: UInt8

    /// Wraps a flags byte.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// UP (bit 0, 0x01): the user was present.
    public static let userPresent = Self(rawValue: 0x01)
    /// UV (bit 2, 0x04): the user was verified.
    public static let userVerified = Self(rawValue: 0x04)
    /// BE (bit 3, 0x08): the credential is backup eligible.
    public static let backupEligible = Self(rawValue: 0x08)
    /// BS (bit 4, 0x10): the credential is currently backed up.
    public static let backupState = Self(rawValue: 0x10)
    /// AT (bit 6, 0x40): attested credential data follows the sign counter.
    public static let attestedCredentialData = Self(rawValue: 0x40)
    /// ED (bit 7, 0x80): an extensions map ends the authenticator data.
    public static let extensionData = Self(rawValue: 0x80)

    /// The set flags by their WebAuthn abbreviations, e.g. `[UP, UV, AT]`.
    public var description: String {
        let names: [(Self, String)] = [
            (.userPresent, "UP"), (.userVerified, "UV"), (.backupEligible, "BE"), (.backupState, "BS"),
            (.attestedCredentialData, "AT"), (.extensionData, "ED"),
        ]
        var parts = names.filter { contains($0.0) }.map(\.1)
        let reserved = rawValue & 0x22
        if reserved != 0 { parts.append("RFU 0x\(Hex.encode([reserved]))") }
        return "[" + parts.joined(separator: ", ") + "]"
    }
}
