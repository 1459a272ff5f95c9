/// What a tunnel service saw of one tunnel: every relayed message with its time and direction, who
/// attached when, and how the tunnel closed. Written by `hybrid-sim relay --record DIR` (one file per
/// tunnel) and read by `hybrid-sim inspect`. Pure: ``encode()`` and ``init(decoding:)`` do no I/O.
///
/// File format, version 1 (Docs/INSPECT.md, "Recording format"); integers are big-endian:
///
/// ```
/// file     = header record* close
/// header   = "HSIMREC" (7 bytes) ‖ version u8 (1) ‖ start u64 (Unix time, ms) ‖ flow u8
///            ‖ tunnel ID (16 bytes) ‖ routing ID (3 bytes)
///            flow: 1 = opened with /cable/new (QR flow), 2 = opened with /cable/contact (linked flow)
/// record   = kind u8 ‖ time u64 (ns since start, never decreasing) ‖ body
///   kind 1 = message:  direction u8 (0 creator→joiner, 1 joiner→creator) ‖ length u32 ‖ bytes
///   kind 2 = attached: side u8 (0 creator, 1 joiner)
/// close    = kind 3 ‖ time u64 ‖ close code u16 (0: none) ‖ reason length u16 ‖ UTF-8 reason
/// ```
/// The bytes of a message are exactly what the relay forwarded (one WebSocket binary message).
public struct TunnelRecording: Sendable, Hashable {
    /// The format version this code writes and reads.
    public static let version: UInt8 = 1
    /// The 7-byte magic that starts every recording.
    public static let magic: [UInt8] = Array("HSIMREC".utf8)
    /// The largest message a recording may hold (a sanity bound; relays cap messages far lower).
    public static let maxMessageSize = 16 * 1024 * 1024

    /// How the tunnel was opened.
    public enum Flow: UInt8, Sendable, Hashable, CustomStringConvertible {
        /// `/cable/new` by the phone; the desktop joins (QR flow, `Noise_KNpsk0`).
        case qr = 1
        /// `/cable/contact` by the desktop; the phone joins (linked flow, `Noise_NKpsk0`).
        case linked = 2

        /// "QR" / "linked".
        public var description: String { self == .qr ? "QR" : "linked" }
    }

    /// Which way a message travelled.
    public enum Direction: UInt8, Sendable, Hashable {
        /// From the side that opened the tunnel to the side that joined it.
        case creatorToJoiner = 0
        /// From the side that joined to the side that opened it.
        case joinerToCreator = 1
    }

    /// A side of the tunnel.
    public enum Side: UInt8, Sendable, Hashable {
        /// Opened the tunnel.
        case creator = 0
        /// Joined it.
        case joiner = 1
    }

    /// One thing that happened.
    public enum Event: Sendable, Hashable {
        /// A relayed message.
        case message(Direction, [UInt8])
        /// A side's WebSocket attached.
        case attached(Side)
        /// The tunnel closed with this close code (`nil`: none) and reason. Always the last event.
        case closed(code: UInt16?, reason: String)
    }

    /// Time since ``startMilliseconds`` in nanoseconds, and what happened.
    public struct Entry: Sendable, Hashable {
        /// Nanoseconds since the tunnel was opened.
        public var nanoseconds: UInt64
        /// The event.
        public var event: Event

        /// Creates an entry.
        public init(nanoseconds: UInt64, event: Event) {
            self.nanoseconds = nanoseconds
            self.event = event
        }
    }

    /// When the tunnel was opened, Unix time in milliseconds.
    public var startMilliseconds: UInt64
    /// How it was opened.
    public var flow: Flow
    /// The 16-byte tunnel ID.
    public var tunnelID: [UInt8]
    /// The 3-byte routing ID the relay assigned.
    public var routingID: [UInt8]
    /// What happened, in order; the last entry is `.closed`.
    public var entries: [Entry]

    /// Creates a recording. Traps unless `tunnelID` is 16 bytes and `routingID` 3 (a recording
    /// read from a file is checked by ``init(decoding:)`` instead, which throws).
    public init(startMilliseconds: UInt64, flow: Flow, tunnelID: [UInt8], routingID: [UInt8], entries: [Entry]) {
        precondition(tunnelID.count == 16 && routingID.count == 3, "tunnel ID is 16 bytes, routing ID 3")
        self.startMilliseconds = startMilliseconds
        self.flow = flow
        self.tunnelID = tunnelID
        self.routingID = routingID
        self.entries = entries
    }

    /// The relayed messages with their times.
    public var messages: [(nanoseconds: UInt64, direction: Direction, bytes: [UInt8])] {
        entries.compactMap { entry in
            if case .message(let direction, let bytes) = entry.event { return (entry.nanoseconds, direction, bytes) }
            return nil
        }
    }

    /// The file bytes. A recording without a final `.closed` entry is written as if closed with no
    /// code and reason "recording ended".
    public func encode() -> [UInt8] {
        var out = Self.magic + [Self.version]
        out.appendBigEndian(startMilliseconds, bytes: 8)
        out.append(flow.rawValue)
        out += tunnelID + routingID
        var closed = false
        for entry in entries where !closed {
            switch entry.event {
            case .message(let direction, let bytes):
                out.append(1)
                out.appendBigEndian(entry.nanoseconds, bytes: 8)
                out.append(direction.rawValue)
                out.appendBigEndian(UInt64(bytes.count), bytes: 4)
                out += bytes
            case .attached(let side):
                out.append(2)
                out.appendBigEndian(entry.nanoseconds, bytes: 8)
                out.append(side.rawValue)
            case .closed(let code, let reason):
                Self.appendClose(to: &out, nanoseconds: entry.nanoseconds, code: code, reason: reason)
                closed = true
            }
        }
        if !closed {
            Self.appendClose(to: &out, nanoseconds: entries.last?.nanoseconds ?? 0, code: nil, reason: "recording ended")
        }
        return out
    }

    private static func appendClose(to out: inout [UInt8], nanoseconds: UInt64, code: UInt16?, reason: String) {
        let text = Array(reason.utf8.prefix(Int(UInt16.max)))
        out.append(3)
        out.appendBigEndian(nanoseconds, bytes: 8)
        out.appendBigEndian(UInt64(code ?? 0), bytes: 2)
        out.appendBigEndian(UInt64(text.count), bytes: 2)
        out += text
    }

    /// Parses a recording; every defect is a specific ``RecordingError`` naming the byte offset.
    public init(decoding bytes: [UInt8]) throws(RecordingError) {
        var reader = RecordingReader(bytes: bytes)
        guard bytes.count >= Self.magic.count, Array(bytes.prefix(Self.magic.count)) == Self.magic else {
            throw .notARecording
        }
        reader.offset = Self.magic.count
        let version = try reader.byte("the version")
        guard version == Self.version else { throw .unsupportedVersion(version) }
        let start = try reader.integer(8, "the start time")
        let flowByte = try reader.byte("the flow")
        guard let flow = Flow(rawValue: flowByte) else { throw .invalidField(offset: reader.offset - 1, "flow \(flowByte) (expected 1 or 2)") }
        let tunnelID = try reader.take(16, "the tunnel ID")
        let routingID = try reader.take(3, "the routing ID")
        var entries: [Entry] = []
        var last: UInt64 = 0
        while true {
            guard reader.offset < bytes.count else { throw .missingClose(records: entries.count) }
            let recordOffset = reader.offset
            let kind = try reader.byte("a record kind")
            let time = try reader.integer(8, "a record time")
            guard time >= last else { throw .invalidField(offset: recordOffset + 1, "record time goes backwards") }
            last = time
            switch kind {
            case 1:
                let directionByte = try reader.byte("a message direction")
                guard let direction = Direction(rawValue: directionByte) else {
                    throw .invalidField(offset: reader.offset - 1, "direction \(directionByte) (expected 0 or 1)")
                }
                let length = try reader.integer(4, "a message length")
                guard length <= UInt64(Self.maxMessageSize) else {
                    throw .invalidField(offset: reader.offset - 4, "message length \(length) above \(Self.maxMessageSize)")
                }
                let body = try reader.take(Int(length), "a message of \(length) bytes")
                entries.append(Entry(nanoseconds: time, event: .message(direction, body)))
            case 2:
                let sideByte = try reader.byte("a side")
                guard let side = Side(rawValue: sideByte) else {
                    throw .invalidField(offset: reader.offset - 1, "side \(sideByte) (expected 0 or 1)")
                }
                entries.append(Entry(nanoseconds: time, event: .attached(side)))
            case 3:
                let code = try reader.integer(2, "a close code")
                let length = try reader.integer(2, "a close reason length")
                let text = try reader.take(Int(length), "a close reason of \(length) bytes")
                guard let reason = String(validating: text, as: UTF8.self) else {
                    throw .invalidField(offset: reader.offset - text.count, "close reason is not UTF-8")
                }
                entries.append(Entry(nanoseconds: time, event: .closed(code: code == 0 ? nil : UInt16(code), reason: reason)))
                guard reader.offset == bytes.count else {
                    throw .trailingBytes(offset: reader.offset, count: bytes.count - reader.offset)
                }
                self.init(startMilliseconds: start, flow: flow, tunnelID: tunnelID, routingID: routingID, entries: entries)
                return
            default:
                throw .unknownRecordKind(kind, offset: recordOffset)
            }
        }
    }
}

/// Why a recording could not be read.
public enum RecordingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file does not start with `HSIMREC`.
    case notARecording
    /// A version this build does not read.
    case unsupportedVersion(UInt8)
    /// The file ends inside `what`, which starts at `offset` and needs `needed` bytes.
    case truncated(offset: Int, needed: Int, available: Int, what: String)
    /// The file ends after a whole record but without the closing record (cut at a record boundary).
    case missingClose(records: Int)
    /// A record kind other than 1, 2, 3.
    case unknownRecordKind(UInt8, offset: Int)
    /// A field holds an impossible value.
    case invalidField(offset: Int, String)
    /// Bytes follow the closing record.
    case trailingBytes(offset: Int, count: Int)

    /// A sentence for the terminal.
    public var description: String {
        switch self {
        case .notARecording: return "not a tunnel recording (the file does not start with \"HSIMREC\")"
        case .unsupportedVersion(let v): return "recording format version \(v) is not supported (this build reads version \(TunnelRecording.version))"
        case .truncated(let offset, let needed, let available, let what):
            return "recording truncated: \(what) at byte \(offset) needs \(needed) bytes, only \(available) left"
        case .missingClose(let records):
            return "recording truncated: it ends after \(records) record(s) without the closing record"
        case .unknownRecordKind(let kind, let offset): return "recording corrupted: unknown record kind \(kind) at byte \(offset)"
        case .invalidField(let offset, let what): return "recording corrupted at byte \(offset): \(what)"
        case .trailingBytes(let offset, let count): return "recording corrupted: \(count) byte(s) after the closing record at byte \(offset)"
        }
    }
}

private struct RecordingReader {
    let bytes: [UInt8]
    var offset = 0

    mutating func take(_ count: Int, _ what: String) throws(RecordingError) -> [UInt8] {
        let available = bytes.count - offset
        guard count <= available else { throw .truncated(offset: offset, needed: count, available: available, what: what) }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    mutating func byte(_ what: String) throws(RecordingError) -> UInt8 { try take(1, what)[0] }

    mutating func integer(_ size: Int, _ what: String) throws(RecordingError) -> UInt64 {
        try take(size, what).reduce(0) { $0 << 8 | UInt64($1) }
    }
}

private extension Array where Element == UInt8 {
    mutating func appendBigEndian(_ value: UInt64, bytes: Int) {
        for shift in stride(from: (bytes - 1) * 8, through: 0, by: -8) { append(UInt8(value >> UInt64(shift) & 0xFF)) }
    }
}
