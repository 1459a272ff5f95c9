import CTAP2

/// An error from the hybrid protocol core. Two errors are equal when their ``code`` is, so tests
/// can write `#expect(throws: HybridError(.decryptionFailed))`; ``reason`` says which rule failed.
///
/// Peer mistakes (bad bytes on the wire, a bad QR code) throw this. Misuse of the API by the caller
/// (calling a state machine method in the wrong state) is a precondition failure instead.
public struct HybridError: CodedError {
    /// The family of failure.
    public enum Code: String, Hashable, Sendable, CaseIterable {
        /// The `FIDO:/` digits are malformed (non-digit, bad length, value out of range).
        case invalidDigits
        /// The QR code is not a valid caBLE v2 QR payload.
        case invalidQRCode
        /// A derived or wire value has the wrong size.
        case invalidLength
        /// A P-256 point does not decode or decompress.
        case invalidPublicKey
        /// An advert plaintext breaks a rule (reserved byte, unknown domain).
        case invalidAdvert
        /// A tunnel-server domain ID is in the assigned range but unknown (2…255). Nothing throws
        /// it: an advert naming such a domain is ``invalidAdvert`` (the domain is one of the advert's
        /// rules, PROTOCOL.md §3.4), and ``TunnelDomainID/host`` answers `nil` for it. Kept so that
        /// code naming it still builds (Swift cannot mark one case of a `CaseIterable` enum
        /// deprecated); it goes in the first release that may break the API.
        case unknownTunnelDomain
        /// A Noise handshake message is malformed or does not authenticate.
        case handshakeFailed
        /// A transport message does not decrypt under the expected key and sequence number.
        case decryptionFailed
        /// A transport message's padding is inconsistent.
        case invalidPadding
        /// The 2^24 per-direction message limit was reached.
        case sequenceExhausted
        /// A framed message (type byte) is malformed or of an unknown type.
        case invalidFrame
        /// The post-handshake message breaks a rule.
        case invalidPostHandshakeMessage
        /// Linking information is malformed or its signature does not verify.
        case invalidLinkingInfo
        /// The peer sent a message the protocol does not allow at this point.
        case unexpectedMessage
        /// A CTAP2 message inside the tunnel is malformed.
        case invalidCTAPMessage
    }

    /// The family of failure.
    public let code: Code
    /// Which rule failed, for people. Never contains key material.
    public let reason: String

    /// An error of `code` with no reason, the value tests match thrown errors against.
    public init(_ code: Code) { self.init(code, "") }

    /// Creates an error.
    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }
}
