import CTAP2
import Crypto

/// The secret a linked phone proves its push channel with (the simulator's stand-in for FCM,
/// Docs/LINKING.md). Not part of Chromium's protocol.
///
/// The contact ID a phone hands to desktops (linking-map key 1) is the SHA-256 of its listen token.
/// The relay lets a phone listen on `/cable/listen/{contact ID}` only with the token whose hash that
/// ID is, and takes a revocation only as the revoked token. So a desktop, which holds the contact ID
/// and never the token, can contact the phone but cannot listen in its place or revoke its links.
/// On Android the same roles are played by the FCM registration: desktops hold it, but only Google's
/// server can send to it and only the registered app receives.
public struct ListenToken: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The token's length in bytes.
    public static let size = 32
    /// The length of its unpadded base64url spelling.
    public static let encodedLength = (size * 4 + 2) / 3

    /// The secret itself.
    public let bytes: [UInt8]

    /// A token of exactly ``size`` bytes; `nil` for any other length.
    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.size else { return nil }
        self.bytes = bytes
    }

    /// A fresh token from `random`.
    public init(random: RandomSource = .system) {
        bytes = random.bytes(Self.size)
    }

    /// A token spelled as canonical unpadded base64url; `nil` for anything else.
    public init?(base64URL text: some StringProtocol) {
        guard text.utf8.count == Self.encodedLength, let bytes = Base64URL.decodeUnpadded(text) else { return nil }
        self.init(bytes: bytes)
    }

    /// Unpadded base64url, as sent in the listen request's headers.
    public var base64URL: String { Base64URL.encode(bytes) }

    /// The contact ID desktops are given: SHA-256 of the token (32 bytes).
    public var contactID: [UInt8] { Array(SHA256.hash(data: bytes)) }

    /// Names the token by its contact ID's first bytes; the secret is never printed (logs, errors).
    public var description: String { "ListenToken(contact ID \(Hex.encode(contactID.prefix(4)))…)" }

    /// As ``description``.
    public var debugDescription: String { description }
}
