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

    /// What an anomaly is, for tools (`anomalyKinds` beside `anomalies`, one kind per sentence in
    /// the same order): a script matches these names, not the sentences, which may be reworded.
    /// Docs/INSPECT.md's anomaly table gives each kind's meaning.
    public enum AnomalyKind: String, Sendable, Hashable, Codable, CaseIterable {
        // The session's.
        /// `--qr` does not parse as a `FIDO:/` code.
        case qrUnreadable
        /// `--qr` was given for a linked session, which starts without one.
        case qrForLinkedSession
        /// The QR code's tunnel ID is not the recording's: another session's code.
        case qrOtherSession
        /// The phone sent the first message; the desktop (Noise initiator) sends it.
        case phoneSpokeFirst
        /// The desktop sent nothing.
        case noHandshake
        /// The desktop's handshake message had no answer.
        case phoneNeverAnswered
        /// The keys matched but no CTAP response was recorded.
        case noCTAPResponse
        // A handshake message's.
        /// The first 65 bytes are not an uncompressed P-256 point.
        case handshakeNotAPoint
        /// Not 81 bytes.
        case handshakeSize
        /// The phone's handshake message came before the desktop's.
        case handshakeOrder
        // A transport message's shape and sequence.
        /// Not whole 32-byte padded blocks plus a 16-byte tag.
        case transportSize
        /// Malformed and not authenticating: cut or damaged in transit, or not a transport message.
        case malformed
        /// Does not authenticate at its sequence number while other messages in its direction do.
        case badTag
        /// Authenticates at a later sequence number than expected: messages missing.
        case sequenceGap
        /// Authenticates at a number already used: a replayed message.
        case sequenceRepeated
        /// Sent before a message recorded earlier, or recorded before ones sent earlier.
        case reordered
        /// Authenticates with the other direction's key.
        case wrongDirection
        /// The padding does not unpad.
        case badPadding
        /// Padding bytes that are not zero.
        case paddingNotZero
        /// A block or more of padding, more than Chromium sends.
        case paddingOverBlock
        /// The desktop sent a message after its shutdown.
        case afterShutdown
        // A decrypted message's contents.
        /// The post-handshake message is not a CBOR item.
        case postHandshakeNotCBOR
        /// The post-handshake message breaks Chromium's rules.
        case postHandshakeRefused
        /// A frame of an unknown type, or an empty one.
        case unknownFrame
        /// A shutdown from the phone (only desktops send one).
        case shutdownFromPhone
        /// A shutdown with a payload.
        case shutdownPayload
        /// A CTAP request without a command byte.
        case requestWithoutCommand
        /// A CTAP response without a status byte.
        case responseWithoutStatus
        /// An error status followed by a body.
        case errorStatusWithBody
        /// A CTAP response with no request before it.
        case responseWithoutRequest
        /// A CTAP message's CBOR does not decode.
        case undecodableCBOR
        /// An update message from the desktop (phones send them).
        case updateFromDesktop
        /// An update message a Chromium desktop closes on.
        case updateRefused
        /// An update message's linking map is invalid.
        case invalidLinking
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
        /// What each of ``anomalies`` is, in the same order, for tools.
        public var anomalyKinds: [AnomalyKind]
        /// The decrypted message's payload in hex, when decrypted: a CTAP request's command byte or a
        /// response's status byte, then its CBOR; the post-handshake message's CBOR. Not given for a
        /// message holding a link secret (an update message, a post-handshake message with linking).
        public var payload: String?
        /// The payload's CBOR, decoded (after the command or status byte), for tools (``DecodedCBOR``;
        /// a link secret shown as its byte count only).
        public var cbor: DecodedCBOR?

        /// One message; `payload` and `cbor` are set once it is decrypted and decoded. `anomalyKinds`
        /// should hold one kind for each of `anomalies`, in order (``Inspector`` always gives them).
        public init(
            index: Int, milliseconds: Double, from: String, to: String, bytes: Int, sequence: Int?, plaintextBytes: Int?,
            title: String, details: [String], anomalies: [String], anomalyKinds: [AnomalyKind] = [], payload: String? = nil,
            cbor: DecodedCBOR? = nil
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
            self.anomalyKinds = anomalyKinds
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
    /// What each of ``anomalies`` is, in the same order, for tools.
    public var anomalyKinds: [AnomalyKind] = []
    /// What is unusual about the session but allowed, so not an anomaly (a session that ended
    /// without the desktop's shutdown message, which the protocol tolerates).
    public var notes: [String] = []

    /// Every anomaly: the session's and each message's (prefixed with its index).
    public var allAnomalies: [String] {
        anomalies + messages.flatMap { message in message.anomalies.map { "message \(message.index): \($0)" } }
    }
}

extension Inspection.Message {
    /// Adds an anomaly: what it is and the sentence that says so.
    mutating func flag(_ kind: Inspection.AnomalyKind, _ text: String) {
        anomalyKinds.append(kind)
        anomalies.append(text)
    }
}
