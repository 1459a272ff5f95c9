/// A COSE algorithm identifier (IANA "COSE Algorithms" registry), as used in `pubKeyCredParams`,
/// COSE keys and packed attestation statements. Unknown values are kept as they are.
public struct COSEAlgorithmIdentifier: RawRepresentable, Hashable, Sendable, CustomStringConvertible,
    ExpressibleByIntegerLiteral
{
    /// The registered integer.
    public let rawValue: Int

    /// Wraps an identifier.
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Wraps an identifier written as a literal (`-7`).
    public init(integerLiteral value: Int) { self.rawValue = value }

    /// ES256: ECDSA with P-256 and SHA-256 (-7). The only algorithm this module signs and verifies.
    public static let es256: Self = -7
    /// EdDSA (-8).
    public static let edDSA: Self = -8
    /// ES384: ECDSA with P-384 and SHA-384 (-35).
    public static let es384: Self = -35
    /// ES512: ECDSA with P-521 and SHA-512 (-36).
    public static let es512: Self = -36
    /// PS256: RSASSA-PSS with SHA-256 (-37).
    public static let ps256: Self = -37
    /// RS256: RSASSA-PKCS1-v1_5 with SHA-256 (-257).
    public static let rs256: Self = -257

    public var description: String {
        switch self {
        case .es256: return "ES256 (-7)"
        case .edDSA: return "EdDSA (-8)"
        case .es384: return "ES384 (-35)"
        case .es512: return "ES512 (-36)"
        case .ps256: return "PS256 (-37)"
        case .rs256: return "RS256 (-257)"
        default: return "COSE algorithm \(rawValue)"
        }
    }
}
