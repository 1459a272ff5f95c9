/// The status byte that starts every CTAP2 response (CTAP 2.2 §6.3 "Status codes").
///
/// A protocol *value*, not a Swift error: an authenticator returns it inside a ``CTAP2Response``,
/// and a client inspects it. Unknown bytes are kept as they are.
public struct CTAP2StatusCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The status byte.
    public let rawValue: UInt8

    /// Wraps a status byte.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// `CTAP2_OK` (0x00): success.
    public static let ok = Self(rawValue: 0x00)
    /// `CTAP1_ERR_INVALID_COMMAND` (0x01): the command is not known or not allowed.
    public static let invalidCommand = Self(rawValue: 0x01)
    /// `CTAP1_ERR_INVALID_PARAMETER` (0x02): a parameter is invalid.
    public static let invalidParameter = Self(rawValue: 0x02)
    /// `CTAP1_ERR_INVALID_LENGTH` (0x03): a message or field has an invalid length.
    public static let invalidLength = Self(rawValue: 0x03)
    /// `CTAP1_ERR_INVALID_SEQ` (0x04): invalid message sequencing.
    public static let invalidSequence = Self(rawValue: 0x04)
    /// `CTAP1_ERR_TIMEOUT` (0x05): message timed out.
    public static let timeout = Self(rawValue: 0x05)
    /// `CTAP1_ERR_CHANNEL_BUSY` (0x06): the channel is busy.
    public static let channelBusy = Self(rawValue: 0x06)
    /// `CTAP2_ERR_CBOR_UNEXPECTED_TYPE` (0x11): a CBOR value has an unexpected type.
    public static let cborUnexpectedType = Self(rawValue: 0x11)
    /// `CTAP2_ERR_INVALID_CBOR` (0x12): the request is not valid CBOR.
    public static let invalidCBOR = Self(rawValue: 0x12)
    /// `CTAP2_ERR_MISSING_PARAMETER` (0x14): a required parameter is missing.
    public static let missingParameter = Self(rawValue: 0x14)
    /// `CTAP2_ERR_LIMIT_EXCEEDED` (0x15): a limit (for example on list sizes) was exceeded.
    public static let limitExceeded = Self(rawValue: 0x15)
    /// `CTAP2_ERR_CREDENTIAL_EXCLUDED` (0x19): a credential in the exclude list is present.
    public static let credentialExcluded = Self(rawValue: 0x19)
    /// `CTAP2_ERR_PROCESSING` (0x21): processing (lengthy operation in progress).
    public static let processing = Self(rawValue: 0x21)
    /// `CTAP2_ERR_INVALID_CREDENTIAL` (0x22): the credential is not valid for the authenticator.
    public static let invalidCredential = Self(rawValue: 0x22)
    /// `CTAP2_ERR_USER_ACTION_PENDING` (0x23): authentication is waiting for user interaction.
    public static let userActionPending = Self(rawValue: 0x23)
    /// `CTAP2_ERR_OPERATION_PENDING` (0x24): processing, lengthy operation in progress.
    public static let operationPending = Self(rawValue: 0x24)
    /// `CTAP2_ERR_NO_OPERATIONS` (0x25): no request is pending.
    public static let noOperations = Self(rawValue: 0x25)
    /// `CTAP2_ERR_UNSUPPORTED_ALGORITHM` (0x26): none of the requested algorithms is supported.
    public static let unsupportedAlgorithm = Self(rawValue: 0x26)
    /// `CTAP2_ERR_OPERATION_DENIED` (0x27): the user declined.
    public static let operationDenied = Self(rawValue: 0x27)
    /// `CTAP2_ERR_KEY_STORE_FULL` (0x28): no room for another discoverable credential.
    public static let keyStoreFull = Self(rawValue: 0x28)
    /// `CTAP2_ERR_UNSUPPORTED_OPTION` (0x2B): an option is not supported.
    public static let unsupportedOption = Self(rawValue: 0x2B)
    /// `CTAP2_ERR_INVALID_OPTION` (0x2C): an option is not valid for this command.
    public static let invalidOption = Self(rawValue: 0x2C)
    /// `CTAP2_ERR_KEEPALIVE_CANCEL` (0x2D): the client cancelled the request.
    public static let keepaliveCancel = Self(rawValue: 0x2D)
    /// `CTAP2_ERR_NO_CREDENTIALS` (0x2E): no valid credentials were found.
    public static let noCredentials = Self(rawValue: 0x2E)
    /// `CTAP2_ERR_USER_ACTION_TIMEOUT` (0x2F): the user did not act in time.
    public static let userActionTimeout = Self(rawValue: 0x2F)
    /// `CTAP2_ERR_NOT_ALLOWED` (0x30): continuation command (for example getNextAssertion) not allowed.
    public static let notAllowed = Self(rawValue: 0x30)
    /// `CTAP2_ERR_PIN_INVALID` (0x31).
    public static let pinInvalid = Self(rawValue: 0x31)
    /// `CTAP2_ERR_PIN_BLOCKED` (0x32).
    public static let pinBlocked = Self(rawValue: 0x32)
    /// `CTAP2_ERR_PIN_AUTH_INVALID` (0x33).
    public static let pinAuthInvalid = Self(rawValue: 0x33)
    /// `CTAP2_ERR_PIN_AUTH_BLOCKED` (0x34).
    public static let pinAuthBlocked = Self(rawValue: 0x34)
    /// `CTAP2_ERR_PIN_NOT_SET` (0x35).
    public static let pinNotSet = Self(rawValue: 0x35)
    /// `CTAP2_ERR_PUAT_REQUIRED` (0x36): a pinUvAuthToken is required (CTAP 2.0: `PIN_REQUIRED`).
    public static let pinUvAuthTokenRequired = Self(rawValue: 0x36)
    /// `CTAP2_ERR_PIN_POLICY_VIOLATION` (0x37).
    public static let pinPolicyViolation = Self(rawValue: 0x37)
    /// `CTAP2_ERR_REQUEST_TOO_LARGE` (0x39): the request exceeds the authenticator's maximum size.
    public static let requestTooLarge = Self(rawValue: 0x39)
    /// `CTAP2_ERR_ACTION_TIMEOUT` (0x3A): the authenticator timed out waiting for an action.
    public static let actionTimeout = Self(rawValue: 0x3A)
    /// `CTAP2_ERR_UP_REQUIRED` (0x3B): user presence is required.
    public static let upRequired = Self(rawValue: 0x3B)
    /// `CTAP2_ERR_UV_BLOCKED` (0x3C): built-in user verification is blocked.
    public static let uvBlocked = Self(rawValue: 0x3C)
    /// `CTAP2_ERR_INTEGRITY_FAILURE` (0x3D).
    public static let integrityFailure = Self(rawValue: 0x3D)
    /// `CTAP2_ERR_INVALID_SUBCOMMAND` (0x3E).
    public static let invalidSubcommand = Self(rawValue: 0x3E)
    /// `CTAP2_ERR_UV_INVALID` (0x3F): user verification failed.
    public static let uvInvalid = Self(rawValue: 0x3F)
    /// `CTAP2_ERR_UNAUTHORIZED_PERMISSION` (0x40).
    public static let unauthorizedPermission = Self(rawValue: 0x40)
    /// `CTAP1_ERR_OTHER` (0x7F): any other error.
    public static let other = Self(rawValue: 0x7F)

    /// Whether this is `CTAP2_OK`.
    public var isSuccess: Bool { self == .ok }

    /// The specification's constant name (`CTAP2_ERR_NO_CREDENTIALS`), or a range name for
    /// extension (0xE0–0xEF), vendor (0xF0–0xFF) and unassigned bytes.
    public var name: String {
        if let known = Self.names[rawValue] { return known }
        switch rawValue {
        case 0xE0...0xEF: return "CTAP2_ERR_EXTENSION_\(rawValue - 0xE0)"
        case 0xF0...0xFF: return "CTAP2_ERR_VENDOR_\(rawValue - 0xF0)"
        default: return "UNASSIGNED"
        }
    }

    /// `CTAP2_ERR_NO_CREDENTIALS (0x2E)`.
    public var description: String {
        "\(name) (0x\(Hex.encode([rawValue], uppercase: true)))"
    }

    private static let names: [UInt8: String] = [
        0x00: "CTAP2_OK", 0x01: "CTAP1_ERR_INVALID_COMMAND", 0x02: "CTAP1_ERR_INVALID_PARAMETER",
        0x03: "CTAP1_ERR_INVALID_LENGTH", 0x04: "CTAP1_ERR_INVALID_SEQ", 0x05: "CTAP1_ERR_TIMEOUT",
        0x06: "CTAP1_ERR_CHANNEL_BUSY", 0x0A: "CTAP1_ERR_LOCK_REQUIRED", 0x0B: "CTAP1_ERR_INVALID_CHANNEL",
        0x11: "CTAP2_ERR_CBOR_UNEXPECTED_TYPE", 0x12: "CTAP2_ERR_INVALID_CBOR",
        0x14: "CTAP2_ERR_MISSING_PARAMETER", 0x15: "CTAP2_ERR_LIMIT_EXCEEDED",
        0x17: "CTAP2_ERR_FP_DATABASE_FULL", 0x18: "CTAP2_ERR_LARGE_BLOB_STORAGE_FULL",
        0x19: "CTAP2_ERR_CREDENTIAL_EXCLUDED", 0x21: "CTAP2_ERR_PROCESSING",
        0x22: "CTAP2_ERR_INVALID_CREDENTIAL", 0x23: "CTAP2_ERR_USER_ACTION_PENDING",
        0x24: "CTAP2_ERR_OPERATION_PENDING", 0x25: "CTAP2_ERR_NO_OPERATIONS",
        0x26: "CTAP2_ERR_UNSUPPORTED_ALGORITHM", 0x27: "CTAP2_ERR_OPERATION_DENIED",
        0x28: "CTAP2_ERR_KEY_STORE_FULL", 0x2B: "CTAP2_ERR_UNSUPPORTED_OPTION",
        0x2C: "CTAP2_ERR_INVALID_OPTION", 0x2D: "CTAP2_ERR_KEEPALIVE_CANCEL",
        0x2E: "CTAP2_ERR_NO_CREDENTIALS", 0x2F: "CTAP2_ERR_USER_ACTION_TIMEOUT",
        0x30: "CTAP2_ERR_NOT_ALLOWED", 0x31: "CTAP2_ERR_PIN_INVALID", 0x32: "CTAP2_ERR_PIN_BLOCKED",
        0x33: "CTAP2_ERR_PIN_AUTH_INVALID", 0x34: "CTAP2_ERR_PIN_AUTH_BLOCKED",
        0x35: "CTAP2_ERR_PIN_NOT_SET", 0x36: "CTAP2_ERR_PUAT_REQUIRED",
        0x37: "CTAP2_ERR_PIN_POLICY_VIOLATION", 0x39: "CTAP2_ERR_REQUEST_TOO_LARGE",
        0x3A: "CTAP2_ERR_ACTION_TIMEOUT", 0x3B: "CTAP2_ERR_UP_REQUIRED", 0x3C: "CTAP2_ERR_UV_BLOCKED",
        0x3D: "CTAP2_ERR_INTEGRITY_FAILURE", 0x3E: "CTAP2_ERR_INVALID_SUBCOMMAND",
        0x3F: "CTAP2_ERR_UV_INVALID", 0x40: "CTAP2_ERR_UNAUTHORIZED_PERMISSION", 0x7F: "CTAP1_ERR_OTHER",
    ]
}
