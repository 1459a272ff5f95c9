/// What ``Inspector`` made of one tunnel recording: a sequence of decoded messages and the session's
/// anomalies. `Codable` for `hybrid-sim inspect --json` (Docs/INSPECT.md).
public struct Inspection: Sendable, Hashable, Codable {
    /// Whether, and how, the key log opened the session.
    public enum KeyStatus: String, Sendable, Hashable, Codable {
        /// No key log was given: only the handshake and the sizes are shown.
        case notGiven
        /// A key log was given, but the recording holds no handshake (the desktop sent nothing), so
        /// no entry can be matched: an incomplete recording, not keys that do not match.
        case noHandshake
        /// A key-log entry matched this session and each direction's key authenticated its messages
        /// (a message that did not, beside others that did, is an anomaly: altered in transit).
        case matched
        /// The key log has no entry for this session (its handshake ephemeral key): the keys don't match.
        case noEntry
        /// An entry claims this session but one direction's key authenticates none of that
        /// direction's messages: the keys don't match.
        case mismatch
    }

    /// One message of the tunnel.
    public struct Message: Sendable, Hashable, Codable {
        /// 0-based position in the recording.
        public var index: Int
        /// Milliseconds since the tunnel opened.
        public var milliseconds: Double
        /// "desktop" or "phone".
        public var from: String
        /// "phone" or "desktop".
        public var to: String
        /// Bytes on the wire, exactly as the relay recorded them.
        public var bytes: Int
        /// Transport sequence number in its direction (`nil` for the handshake messages).
        public var sequence: Int?
        /// Bytes after decryption and unpadding, when decrypted.
        public var plaintextBytes: Int?
        /// What it is, one line ("Noise KNpsk0 message 1", "CTAP authenticatorGetAssertion request", …).
        public var title: String
        /// Decoded contents, one item per line (annotated CBOR).
        public var details: [String]
        /// What is wrong with this message.
        public var anomalies: [String]
        /// The decrypted message's payload in hex, when decrypted: a CTAP request's command byte or a
        /// response's status byte, then its CBOR; the post-handshake message's CBOR. Not given for a
        /// message holding a link secret (an update message, a post-handshake message with linking).
        public var payload: String?
        /// The payload's CBOR, decoded (after the command or status byte), for tools (``DecodedCBOR``;
        /// a link secret shown as its byte count only).
        public var cbor: DecodedCBOR?

        /// One message; `payload` and `cbor` are set once it is decrypted and decoded.
        public init(
            index: Int, milliseconds: Double, from: String, to: String, bytes: Int, sequence: Int?, plaintextBytes: Int?,
            title: String, details: [String], anomalies: [String], payload: String? = nil, cbor: DecodedCBOR? = nil
        ) {
            self.index = index
            self.milliseconds = milliseconds
            self.from = from
            self.to = to
            self.bytes = bytes
            self.sequence = sequence
            self.plaintextBytes = plaintextBytes
            self.title = title
            self.details = details
            self.anomalies = anomalies
            self.payload = payload
            self.cbor = cbor
        }
    }

    /// "QR" or "linked".
    public var flow: String
    /// The Noise pattern of the flow.
    public var pattern: String
    /// Tunnel ID, hex.
    public var tunnelID: String
    /// Routing ID, hex.
    public var routingID: String
    /// Unix time in milliseconds when the tunnel opened.
    public var startMilliseconds: UInt64
    /// How the key log fared.
    public var keys: KeyStatus
    /// A sentence about the keys.
    public var keyDetail: String
    /// The QR code's contents, when `--qr` was given.
    public var qr: [String]
    /// Every message, in recorded order.
    public var messages: [Message]
    /// How the tunnel closed.
    public var closure: String
    /// The close record's WebSocket status code (1000, 1011, a relay's 4xxx), for tools; absent when
    /// the recording has no close record or the close carried no status.
    public var closeCode: Int?
    /// Session-level anomalies (QR mismatch, wrong order, missing messages, …).
    public var anomalies: [String]
    /// What is unusual about the session but allowed, so not an anomaly (a session that ended
    /// without the desktop's shutdown message, which the protocol tolerates).
    public var notes: [String] = []

    /// Every anomaly: the session's and each message's (prefixed with its index).
    public var allAnomalies: [String] {
        anomalies + messages.flatMap { message in message.anomalies.map { "message \(message.index): \($0)" } }
    }
}
