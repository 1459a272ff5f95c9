import CTAP2
import Crypto
import HybridCore

/// Takes a `TunnelRecording` apart: the Noise handshake in clear, then, with the session's
/// `SessionKeys` from a key log, every transport message (post-handshake message with getInfo,
/// update and linking information, CTAP2 request and response as annotated CBOR, shutdown), and
/// flags what a Chromium peer would not send or accept. Pure: no I/O.
///
/// Roles follow from the flow: in the QR flow the phone opened the tunnel (`/cable/new`) and the
/// desktop joined; in the linked flow the desktop opened it (`/cable/contact`) and the phone joined.
/// The parsing reuses HybridCore's own types (`Crypter` padding and nonces, `Frame`,
/// `PostHandshakeMessage`, `UpdateMessage`, `LinkingInfo`, `QRPayload`).
public enum Inspector {
    /// How many sequence numbers beyond the expected one are tried before a message is declared
    /// undecryptable (to tell a gap from a bad tag).
    static let gapSearch: UInt32 = 8

    /// How many different key-log entries for one handshake are tried before the keys are said
    /// not to match.
    static let maxEntriesTried = 16

    /// Inspects `recording`; `keyLog` is the parsed key log (`nil`: none given), `qrURL` the
    /// session's `FIDO:/` URL if known.
    public static func inspect(_ recording: TunnelRecording, keyLog: [SessionKeys]? = nil, qrURL: String? = nil) -> Inspection {
        // A shared key log holds each session twice (desktop and phone) and may hold a damaged
        // copy: when the first entry for this handshake does not decrypt, the next different one
        // for it is tried, and the first that fits is the session's.
        // At most ``maxEntriesTried`` different entries: a key log of thousands of forged lines for
        // one handshake is not walked thousands of times.
        let first = self.walk(recording, keyLog: keyLog, excluding: [])
        var walk = first
        var tried: Set<Int> = []
        // The first walk is what is shown unless another entry decrypts the session.
        while walk.keyStatus == .mismatch, let used = walk.usedEntry, tried.count < maxEntriesTried {
            tried.insert(used)
            walk = self.walk(recording, keyLog: keyLog, excluding: tried)
        }
        if walk.keyStatus == .mismatch || walk.usedEntry == nil { walk = first }
        var closure = "the recording has no closing record"
        var closeCode: Int?
        for entry in recording.entries {
            if case .closed(let code, let reason) = entry.event {
                closeCode = code.map(Int.init)
                let time = String(format2: Double(entry.nanoseconds) / 1e6)
                closure = "closed at +\(time) ms with " + (code.map { "code \($0)" } ?? "no status") + (reason.isEmpty ? "" : ": \(reason)")
            }
        }
        var anomalies = walk.anomalies
        let qr = qrURL.map { qrLines($0, recording: recording, anomalies: &anomalies) } ?? []
        return Inspection(
            flow: recording.flow.description, pattern: walk.patternName, tunnelID: Hex.encode(recording.tunnelID, uppercase: true),
            routingID: Hex.encode(recording.routingID, uppercase: true), startMilliseconds: recording.startMilliseconds,
            keys: walk.keyStatus, keyDetail: walk.keyDetail, qr: qr, messages: walk.messages, closure: closure, closeCode: closeCode,
            anomalies: anomalies.map(\.text), anomalyKinds: anomalies.map(\.kind), notes: walk.notes)
    }

    /// One pass over the messages, matching the handshake to a key-log entry not in `excluding`.
    private static func walk(_ recording: TunnelRecording, keyLog: [SessionKeys]?, excluding: Set<Int>) -> Walk {
        var walk = Walk(recording: recording, keyLog: keyLog, excluding: excluding)
        for (index, message) in recording.messages.enumerated() {
            walk.process(index: index, nanoseconds: message.nanoseconds, direction: message.direction, bytes: message.bytes)
        }
        walk.finish()
        return walk
    }

    static func qrLines(_ url: String, recording: TunnelRecording, anomalies: inout [Walk.Anomaly]) -> [String] {
        let payload: QRPayload
        do {
            payload = try QRPayload(url: url)
        } catch {
            anomalies.append((.qrUnreadable, "the QR URL does not parse: \(error.reason)"))
            return []
        }
        let tunnelID = QRSecretKeys(qrSecret: payload.secret).tunnelID
        if recording.flow == .linked {
            anomalies.append((.qrForLinkedSession, "a QR code was given for a linked session (linked sessions start without one)"))
        } else if tunnelID != recording.tunnelID {
            anomalies.append(
                (.qrOtherSession, "the QR code's tunnel ID \(Hex.encode(tunnelID, uppercase: true)) is not the recording's: another session's QR code"))
        }
        return [
            "0 (desktop public key): \(CBORAnnotation.short(payload.compressedPublicKey))",
            "1 (qr_secret): 16 bytes; tunnel ID = Derive(qr_secret, -, 2) = \(Hex.encode(tunnelID, uppercase: true))"
                + (tunnelID == recording.tunnelID ? " (matches the recording)" : ""),
            "2 (known tunnel domains): \(payload.knownDomainCount)",
            "3 (timestamp): " + (payload.timestamp.map(String.init) ?? "absent"),
            "4 (can store linking information): " + (payload.supportsLinking.map { $0 ? "true" : "false" } ?? "absent"),
            "5 (request hint): \"\(payload.requestType.rawValue)\"",
        ]
    }
}

/// The state of one pass over the messages (decoding the decrypted ones: `Walk+Messages.swift`).
struct Walk {
    let recording: TunnelRecording
    let keyLog: [SessionKeys]?
    /// Key-log entries tried already for this handshake (they did not decrypt it).
    let excluding: Set<Int>
    /// The key-log entry matched to the handshake, if any.
    var usedEntry: Int?
    let fromDesktop: TunnelRecording.Direction
    let patternName: String
    var keyStatus: Inspection.KeyStatus
    var keyDetail: String
    var keys: SessionKeys?
    var messages: [Inspection.Message] = []
    /// A session anomaly: what it is, and the sentence.
    typealias Anomaly = (kind: Inspection.AnomalyKind, text: String)
    var anomalies: [Anomaly] = []
    var notes: [String] = []
    var desktopCount = 0
    var phoneCount = 0
    /// Each direction's sequence numbers (`true`: from the desktop).
    var sequences: [Bool: SequenceTracker] = [true: SequenceTracker(), false: SequenceTracker()]
    /// Messages that authenticated, per direction (`true`: from the desktop).
    var decryptedBy: [Bool: Int] = [true: 0, false: 0]
    /// Messages that did not authenticate before any message in their direction did (indexes in
    /// `messages`): altered in transit if a later one in that direction does, or else the sign
    /// that this direction's logged key is not the session's (``finish()`` decides).
    var unexplained: [Bool: [Int]] = [true: [], false: []]
    var lastCommand: UInt8?
    /// A desktop transport message did not authenticate (its request, if it was one, is unknown).
    var desktopUnread = false
    var shutdownSeen = false
    var responses = 0

    init(recording: TunnelRecording, keyLog: [SessionKeys]?, excluding: Set<Int>) {
        self.recording = recording
        self.keyLog = keyLog
        self.excluding = excluding
        fromDesktop = recording.flow == .qr ? .joinerToCreator : .creatorToJoiner
        let pattern: NoiseHandshake.Pattern = recording.flow == .qr ? .knpsk0 : .nkpsk0
        patternName = String(decoding: pattern.protocolName.dropLast(), as: UTF8.self)
        keyStatus = keyLog == nil ? .notGiven : .noEntry
        keyDetail = keyLog == nil
            ? "no key log: the handshake is decoded, transport messages are shown by size only"
            : "the key log has \(keyLog?.count ?? 0) entr\(keyLog?.count == 1 ? "y" : "ies"), none for this session's handshake: the keys don't match"
    }

    var shortPattern: String { recording.flow == .qr ? "KNpsk0" : "NKpsk0" }

    mutating func process(index: Int, nanoseconds: UInt64, direction: TunnelRecording.Direction, bytes: [UInt8]) {
        let isDesktop = direction == fromDesktop
        let position = isDesktop ? desktopCount : phoneCount
        if isDesktop { desktopCount += 1 } else { phoneCount += 1 }
        var message = Inspection.Message(
            index: index, milliseconds: Double(nanoseconds) / 1e6, from: isDesktop ? "desktop" : "phone",
            to: isDesktop ? "phone" : "desktop", bytes: bytes.count, sequence: nil, plaintextBytes: nil, title: "",
            details: [], anomalies: [])
        if index == 0 && !isDesktop {
            anomalies.append((.phoneSpokeFirst, "the phone spoke first; the desktop (Noise initiator) sends the first message"))
        }
        if position == 0 {
            handshake(&message, bytes: bytes, isDesktop: isDesktop)
        } else {
            if isDesktop && shutdownSeen { message.flag(.afterShutdown, "the desktop sent a message after its shutdown") }
            transport(&message, bytes: bytes, isDesktop: isDesktop)
        }
        messages.append(message)
    }

    mutating func handshake(_ message: inout Inspection.Message, bytes: [UInt8], isDesktop: Bool) {
        message.title = "Noise \(shortPattern) message \(isDesktop ? 1 : 2)"
        if bytes.count >= 65 {
            let point = Array(bytes.prefix(65))
            message.details.append("e (ephemeral public key): \(CBORAnnotation.short(point))")
            if (try? P256.KeyAgreement.PublicKey(x963Representation: point)) == nil {
                message.flag(.handshakeNotAPoint, "the first 65 bytes are not an uncompressed P-256 point")
            }
            message.details.append("tag over the empty payload: \(CBORAnnotation.short(Array(bytes.dropFirst(65))))")
        }
        if bytes.count != HybridConstants.handshakeMessageSize {
            message.flag(.handshakeSize, "\(bytes.count) bytes; a handshake message is 81 (65-byte point, 16-byte tag)")
        }
        if !isDesktop && desktopCount == 0 {
            message.flag(.handshakeOrder, "handshake message 2 before message 1")
        }
        guard isDesktop, let keyLog, bytes.count >= 65 else { return }
        let ephemeral = Array(bytes.prefix(65))
        // The first entry for this ephemeral key not tried yet that differs from those tried (an
        // identical copy would fail the same way).
        let triedKeys = Set(excluding.map { keyLog[$0] })
        if let found = keyLog.indices.first(where: { index in
            keyLog[index].initiatorEphemeral == ephemeral && !excluding.contains(index) && !triedKeys.contains(keyLog[index])
        }) {
            usedEntry = found
            keys = keyLog[found]
            keyStatus = .matched
            keyDetail = "key log entry \(found + 1) of \(keyLog.count) is this session's (handshake hash \(Hex.encode(keyLog[found].handshakeHash.prefix(8)))…)"
        }
    }

    mutating func transport(_ message: inout Inspection.Message, bytes: [UInt8], isDesktop: Bool) {
        // The Crypter only produces whole padded blocks plus a tag: anything else was cut or made
        // up. It is still tried (a peer may pad otherwise), but one that fails says nothing about
        // the key: a wrong key is judged on messages that could have authenticated.
        let wellFormed = bytes.count >= 48 && (bytes.count - 16) % HybridConstants.paddingGranularity == 0
        if !wellFormed {
            message.flag(.transportSize, "\(bytes.count) bytes is not whole 32-byte padded blocks plus a 16-byte tag")
        }
        let guess = sequences[isDesktop, default: SequenceTracker()].guess
        message.sequence = Int(guess)
        guard let keys, keyStatus == .matched else {
            message.title = !isDesktop && guess == 0 ? "post-handshake message (encrypted)" : "encrypted transport message"
            sequences[isDesktop, default: SequenceTracker()].failed()
            return
        }
        let key = isDesktop ? keys.initiatorToResponder : keys.responderToInitiator
        let tracker = sequences[isDesktop, default: SequenceTracker()]
        guard let (sequence, padded) = Self.opening(bytes, key: key, at: tracker.candidates(search: Inspector.gapSearch)) else {
            // Only then the other direction's key, at as few numbers as this one's after a long run of failures.
            let few = tracker.failingLong(search: Inspector.gapSearch)
            if wellFormed, wrongDirection(&message, bytes: bytes, keys: keys, isDesktop: isDesktop, few: few) { return }
            sequences[isDesktop, default: SequenceTracker()].failed()
            message.title = "encrypted transport message that does not authenticate"
            if isDesktop { desktopUnread = true }
            if !wellFormed {
                message.title = "malformed transport message"
                message.flag(.malformed, "it does not authenticate either (cut or damaged in transit, or not a transport message; not counted against the key)")
            } else if decryptedBy[isDesktop] == 0 {
                unexplained[isDesktop, default: []].append(messages.count)  // this message's index once appended
            } else {
                message.flag(.badTag, Self.badTag(sequence: guess))
            }
            return
        }
        decryptedBy[isDesktop, default: 0] += 1
        message.sequence = Int(sequence)
        if let anomaly = sequences[isDesktop, default: SequenceTracker()].authenticated(sequence, message: messages.count) {
            message.flag(anomaly.kind, anomaly.text)
        }
        let plaintext: [UInt8]
        do {
            plaintext = try Crypter.unpad(padded)
        } catch {
            message.title = "transport message with bad padding"
            message.flag(.badPadding, "bad padding: \(error.reason)")
            return
        }
        message.plaintextBytes = plaintext.count
        let paddingCount = padded.count - plaintext.count - 1
        if padded[plaintext.count..<(padded.count - 1)].contains(where: { $0 != 0 }) {
            message.flag(.paddingNotZero, "padding bytes are not zero")
        }
        if paddingCount >= HybridConstants.paddingGranularity {
            message.flag(.paddingOverBlock, "\(paddingCount) padding bytes: more than one block (Chromium pads to the next multiple of 32)")
        }
        if !isDesktop && sequence == 0 {
            postHandshake(&message, plaintext: plaintext)
        } else {
            frame(&message, plaintext: plaintext, isDesktop: isDesktop)
        }
    }

    /// The first of `candidates` (sequence numbers) at which `bytes` authenticates with `key`, and
    /// the padded plaintext.
    static func opening(_ bytes: [UInt8], key: [UInt8], at candidates: [UInt32]) -> (sequence: UInt32, padded: [UInt8])? {
        let key = SymmetricKey(data: key)
        for sequence in candidates {
            if let padded = open(bytes, key: key, sequence: sequence) { return (sequence, padded) }
        }
        return nil
    }

    /// Whether a message that does not authenticate in its recorded direction does in the other
    /// (a recording whose direction byte is wrong): then it is flagged as such and counted in the
    /// other direction, so that neither direction's later messages read as replayed or missing.
    /// `few`: only the other direction's few likeliest numbers are tried (``SequenceTracker/candidates(search:few:)``).
    mutating func wrongDirection(_ message: inout Inspection.Message, bytes: [UInt8], keys: SessionKeys, isDesktop: Bool, few: Bool) -> Bool {
        let otherKey = isDesktop ? keys.responderToInitiator : keys.initiatorToResponder
        let candidates = sequences[!isDesktop, default: SequenceTracker()].candidates(search: Inspector.gapSearch, few: few)
        guard let (sequence, _) = Self.opening(bytes, key: otherKey, at: candidates) else { return false }
        message.title = "transport message recorded in the wrong direction"
        message.sequence = Int(sequence)
        message.flag(
            .wrongDirection,
            "recorded as the \(message.from)'s, but it authenticates with the \(isDesktop ? "phone-to-desktop" : "desktop-to-phone") key "
                + "at sequence \(sequence): the recording's direction is wrong (not decoded)")
        if let anomaly = sequences[!isDesktop, default: SequenceTracker()].authenticated(sequence, message: messages.count) {
            message.flag(anomaly.kind, anomaly.text)
        }
        decryptedBy[!isDesktop, default: 0] += 1
        if !isDesktop { desktopUnread = true }  // the desktop's message, its request (if one) unread
        return true
    }

    static func open(_ ciphertext: [UInt8], key: SymmetricKey, sequence: UInt32) -> [UInt8]? {
        guard ciphertext.count >= 16, let nonce = try? AES.GCM.Nonce(data: Crypter.nonceBytes(sequence)),
              let box = try? AES.GCM.SealedBox(nonce: nonce, ciphertext: ciphertext.dropLast(16), tag: ciphertext.suffix(16))
        else { return nil }
        return (try? AES.GCM.open(box, using: key)).map { Array($0) }
    }

    static func badTag(sequence: UInt32) -> String {
        "bad tag: does not authenticate with the logged key at sequence \(sequence) (altered in transit)"
    }

    /// Judges the messages that did not authenticate before any other in their direction: where a
    /// later message in the same direction authenticates with the same logged key, the key is right
    /// and they were altered in transit; where none does, that direction's key is not the
    /// session's (or every one of its messages was altered, which the recording cannot tell apart).
    mutating func judgeUnexplained() {
        var mismatched: [String] = []
        for isDesktop in [false, true] {
            guard let indexes = unexplained[isDesktop], !indexes.isEmpty else { continue }
            if decryptedBy[isDesktop, default: 0] > 0 {
                for index in indexes {
                    messages[index].flag(
                        .badTag,
                        Self.badTag(sequence: UInt32(messages[index].sequence ?? 0))
                            + "; later messages this way authenticate, so the key is right")
                }
            } else {
                for index in indexes { messages[index].title = "encrypted transport message (the keys don't match)" }
                mismatched.append(isDesktop ? "desktop-to-phone" : "phone-to-desktop")
            }
        }
        guard !mismatched.isEmpty else { return }
        keyStatus = .mismatch
        let halves = mismatched.joined(separator: " and ")
        keyDetail = decryptedBy.values.allSatisfy { $0 == 0 }
            ? "the key log's entry for this session authenticates none of its transport messages: the keys don't match "
                + "(or every one was altered in transit, which the recording cannot tell apart)"
            : "the key log's \(halves) key authenticates none of that direction's messages: the keys don't match "
                + "(the other direction's do; or every one of them was altered in transit)"
    }

    mutating func finish() {
        judgeUnexplained()
        // A gap that messages recorded later filled is said again: reordered, or fewer missing.
        for tracker in sequences.values {
            for (index, was, now, kind) in tracker.finalAnomalies() {
                for position in messages[index].anomalies.indices where messages[index].anomalies[position] == was {
                    messages[index].anomalies[position] = now
                    messages[index].anomalyKinds[position] = kind
                }
            }
        }
        if desktopCount == 0 {
            anomalies.append((.noHandshake, "no handshake: the desktop sent nothing"))
            if keyStatus == .noEntry {
                keyStatus = .noHandshake
                keyDetail = "the recording holds no handshake, so no key-log entry can be matched (nothing is encrypted either)"
            }
        }
        if desktopCount > 0 && phoneCount == 0 { anomalies.append((.phoneNeverAnswered, "the phone never answered the handshake")) }
        if keyStatus == .matched && responses == 0 { anomalies.append((.noCTAPResponse, "no CTAP response was recorded")) }
        // Every desktop message read, a response given, and the tunnel closed with no shutdown
        // (`desktop --misbehave no-shutdown`, revision-0 desktops): over, but not as Chromium ends it.
        if keyStatus == .matched, responses > 0, !shutdownSeen, !desktopUnread {
            notes.append(
                "no shutdown message from the desktop: tolerated (the transaction was over; the phone takes the "
                    + "tunnel's close as the end), though a Chromium desktop sends one (PROTOCOL §10)")
        }
    }
}

extension String {
    /// A number with one decimal.
    init(format2 value: Double) {
        let tenths = Int((value * 10).rounded())
        self = "\(tenths / 10).\(abs(tenths % 10))"
    }
}
