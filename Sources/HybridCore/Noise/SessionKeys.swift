import CTAP2

/// The secrets of one completed hybrid handshake, as both sides know them: what a key log records
/// (like TLS's `SSLKEYLOGFILE`) so that a recorded tunnel can be decrypted afterwards.
///
/// The session is identified by the initiator's (desktop's) ephemeral public key, the first 65
/// bytes of Noise message 1, which a tunnel recording holds in clear: the key log's equivalent of
/// TLS's client random.
public struct SessionKeys: Sendable, Hashable {
    /// The desktop's ephemeral public key (65 bytes, uncompressed), from handshake message 1.
    public var initiatorEphemeral: [UInt8]
    /// The final Noise handshake hash (32 bytes), the channel binding of the linking signature.
    public var handshakeHash: [UInt8]
    /// `k1` of `Split()`: encrypts desktop → phone traffic.
    public var initiatorToResponder: [UInt8]
    /// `k2` of `Split()`: encrypts phone → desktop traffic.
    public var responderToInitiator: [UInt8]

    /// Creates the keys of one session.
    public init(initiatorEphemeral: [UInt8], handshakeHash: [UInt8], initiatorToResponder: [UInt8], responderToInitiator: [UInt8]) {
        self.initiatorEphemeral = initiatorEphemeral
        self.handshakeHash = handshakeHash
        self.initiatorToResponder = initiatorToResponder
        self.responderToInitiator = responderToInitiator
    }

    /// The label that starts every key-log line.
    public static let keyLogLabel = "HYBRID_SESSION_KEYS"

    /// One key-log line (no newline):
    /// `HYBRID_SESSION_KEYS <ephemeral 130 hex> <handshake hash 64 hex> <k1 64 hex> <k2 64 hex>`,
    /// lower-case hex.
    public var keyLogLine: String {
        [Self.keyLogLabel, Hex.encode(initiatorEphemeral), Hex.encode(handshakeHash),
         Hex.encode(initiatorToResponder), Hex.encode(responderToInitiator)].joined(separator: " ")
    }

    /// Parses a key log: one ``keyLogLine`` per line, its fields separated by spaces or tabs. Empty
    /// lines and lines starting with `#` are skipped, and so are lines with another label (a file shared with other tools); a line with
    /// our label but the wrong shape is an error naming its line number.
    public static func parseKeyLog(_ text: String) throws(HybridError) -> [SessionKeys] {
        try readKeyLog(text).entries
    }

    /// ``parseKeyLog(_:)``, with the number of lines it skipped for another label: a file with
    /// such lines and no entry is another file (a recording given as a key log, a TLS key log),
    /// where an empty or commented one is a key log no session wrote to yet.
    public static func readKeyLog(_ text: String) throws(HybridError) -> (entries: [SessionKeys], otherLines: Int) {
        var result: [SessionKeys] = []
        var otherLines = 0
        // A byte-order mark an editor put first would hide the first line's label.
        let text = text.hasPrefix("\u{FEFF}") ? String(text.dropFirst()) : text
        for (index, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let line = raw.trimmingCharacters(in: " \t")
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            // Fields are separated by runs of spaces or tabs (a log copied through an editor or a
            // spreadsheet may carry tabs): a tab-separated line is read, not skipped as another label's.
            let fields = line.split(omittingEmptySubsequences: true, whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            guard fields.first == keyLogLabel else {
                otherLines += 1
                continue
            }
            let sizes = [65, 32, 32, 32]
            guard fields.count == 5 else {
                throw HybridError(.invalidLength, "key log line \(index + 1): \(fields.count - 1) fields after \(keyLogLabel), expected 4")
            }
            var values: [[UInt8]] = []
            for (field, size) in zip(fields.dropFirst(), sizes) {
                guard let bytes = try? Hex.decode(field), bytes.count == size else {
                    throw HybridError(.invalidLength, "key log line \(index + 1): \"\(field.prefix(16))…\" is not \(size) bytes of hex")
                }
                values.append(bytes)
            }
            result.append(SessionKeys(initiatorEphemeral: values[0], handshakeHash: values[1],
                                      initiatorToResponder: values[2], responderToInitiator: values[3]))
        }
        return (result, otherLines)
    }
}

private extension Substring {
    func trimmingCharacters(in set: String) -> String {
        var s = self[...]
        while let f = s.first, set.contains(f) { s = s.dropFirst() }
        while let l = s.last, set.contains(l) { s = s.dropLast() }
        return String(s)
    }
}
