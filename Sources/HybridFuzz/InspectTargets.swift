import CTAP2
import HybridCore
import HybridInspect

/// `hybrid-sim inspect`'s inputs (Docs/INSPECT.md): the key log, the tunnel recording, and what
/// the inspector decrypts from it, through to both renderings of the sequence diagram.
///
/// All three use one fixed session (never secret: fuzzing only). The inspector matches a key-log
/// entry by the desktop's ephemeral key at the start of handshake message 1 and does not check the
/// handshake itself, so the session needs no real Noise run: two 81-byte handshake messages, and
/// transport messages sealed with ``Crypter`` under the logged traffic keys.
enum InspectTargets {
    static let all = [sessionKeyLog, tunnelRecording, inspectPlaintext]

    static let keys = SessionKeys(
        initiatorEphemeral: Array(FuzzKeys.desktopEphemeral.publicKey.x963Representation),
        handshakeHash: Array(repeating: 0x4B, count: 32), initiatorToResponder: Array(repeating: 0x11, count: 32),
        responderToInitiator: Array(repeating: 0x22, count: 32))
    static let message1 = keys.initiatorEphemeral + [UInt8](repeating: 0xA1, count: 16)
    static let message2 = Array(FuzzKeys.phoneEphemeral.publicKey.x963Representation) + [UInt8](repeating: 0xA2, count: 16)

    /// A QR session's plaintexts: post-handshake message, getAssertion, its response (a user name
    /// with a terminal escape and markup), an update with linking information, a JSON message and
    /// the shutdown. `true`: from the desktop.
    static let session: [(fromDesktop: Bool, bytes: [UInt8])] = {
        let getInfo = CBOR.encode([1: ["FIDO_2_0", "FIDO_2_1"], 3: .bytes(Array(repeating: 0, count: 16))])
        let linking = LinkingInfo(
            contactID: Array(repeating: 0xC0, count: 32), pairingID: Array(1...8), linkSecret: Array(repeating: 0x5E, count: 32),
            authenticatorPublicKey: Array(FuzzKeys.identity.publicKey.x963Representation), name: "Pixel <b>&",
            handshakeSignature: Array(repeating: 0x51, count: 32))
        let request = CBOR.encode([1: "example.com", 2: .bytes(Array(repeating: 0xCD, count: 32))])
        let response = CBOR.encode([
            1: ["id": .bytes(Array(repeating: 0xC1, count: 16)), "type": "public-key"],
            2: .bytes(Array(repeating: 0xAB, count: 32) + [0x05, 0, 0, 0, 1]), 3: .bytes(Array(repeating: 0x30, count: 70)),
            4: ["id": .bytes([1, 2, 3]), "name": "alice\u{1B}[31m <script>", "displayName": "Alice\u{202E}"],
        ])
        return [
            (false, CBOR.encode([1: .bytes(getInfo), 3: ["ctap"]])),
            (true, Frame(type: .ctap, payload: [0x02] + request).bytes),
            (false, Frame(type: .ctap, payload: [0x00] + response).bytes),
            (false, UpdateMessage.frame(linking: linking).bytes),
            (false, Frame(type: .json, payload: Array(#"{"note":"<a href='x'>&amp;\u{2066}"}"#.utf8)).bytes),
            (true, Frame.shutdown.bytes),
        ]
    }()

    /// The recording of `plaintexts` sealed under ``keys`` in a QR session (the phone opened the
    /// tunnel, the desktop joined), closed with `reason`.
    static func recording(_ plaintexts: [(fromDesktop: Bool, bytes: [UInt8])], reason: String = "") -> TunnelRecording {
        var desktop = Crypter(readKey: keys.responderToInitiator, writeKey: keys.initiatorToResponder)
        var phone = Crypter(readKey: keys.initiatorToResponder, writeKey: keys.responderToInitiator)
        var entries: [TunnelRecording.Entry] = [
            .init(nanoseconds: 0, event: .attached(.creator)), .init(nanoseconds: 1_000, event: .attached(.joiner)),
            .init(nanoseconds: 2_000, event: .message(.joinerToCreator, message1)),
            .init(nanoseconds: 3_000, event: .message(.creatorToJoiner, message2)),
        ]
        for (index, plaintext) in plaintexts.enumerated() {
            // Only a sequence number above 2^24 - 1 fails, and an input holds far fewer messages.
            let sealed = plaintext.fromDesktop ? try! desktop.encrypt(plaintext.bytes) : try! phone.encrypt(plaintext.bytes)
            entries.append(.init(
                nanoseconds: UInt64(index + 4) * 1_000_000,
                event: .message(plaintext.fromDesktop ? .joinerToCreator : .creatorToJoiner, sealed)))
        }
        entries.append(.init(nanoseconds: UInt64(plaintexts.count + 4) * 1_000_000, event: .closed(code: 1000, reason: reason)))
        return TunnelRecording(
            startMilliseconds: 1_760_000_000_000, flow: .qr, tunnelID: Array(repeating: 0x0A, count: 16), routingID: [0x2A, 0, 0],
            entries: entries)
    }

    /// Whether the diagrams escape `scalar` (`SequenceDiagram.visible`: C0 and C1 controls, DEL,
    /// line and paragraph separators, bidirectional overrides and isolates).
    static func escaped(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: return true
        default: return false
        }
    }

    /// What is wrong with the two renderings of `inspection`, or `nil`: a raw control or bidi
    /// character (but the line feeds between lines) in either, or markup in the SVG that peer text
    /// could have made (a `<` not starting one of the SVG's own tags, an `&` not starting an entity).
    static func renderingProblem(_ inspection: Inspection) -> String? {
        let text = SequenceDiagram.text(inspection)
        if let scalar = text.unicodeScalars.first(where: { $0 != "\n" && escaped($0) }) {
            return "the terminal diagram holds a raw U+\(String(scalar.value, radix: 16, uppercase: true))"
        }
        let svg = SequenceDiagram.svg(inspection)
        if let scalar = svg.unicodeScalars.first(where: { $0 != "\n" && escaped($0) }) {
            return "the SVG holds a raw U+\(String(scalar.value, radix: 16, uppercase: true))"
        }
        let scalars = Array(svg.unicodeScalars)
        let tags = ["svg ", "/svg>", "style>", "/style>", "defs>", "/defs>", "marker ", "/marker>", "path ", "rect ", "line ", "text ", "/text>"]
        let entities = ["amp;", "lt;", "gt;", "quot;"]
        for (index, scalar) in scalars.enumerated() where scalar == "<" || scalar == "&" {
            // By scalar: `String.hasPrefix` compares Characters, and "&lt;" before a combining mark ends in one.
            let rest = scalars[(index + 1)...].prefix(8)
            if !(scalar == "<" ? tags : entities).contains(where: { rest.starts(with: $0.unicodeScalars) }) {
                return "the SVG holds a raw \(scalar) before \(rest.map { "U+" + String($0.value, radix: 16, uppercase: true) })"
            }
        }
        return nil
    }

    /// `SessionKeys.parseKeyLog` (`--keylog FILE`, `HYBRID_SESSION_KEYS` lines): what parses,
    /// written as key-log lines, parses to the same keys.
    static let sessionKeyLog = FuzzTarget(
        "session-keylog", "SessionKeys.parseKeyLog (inspect --keylog); every entry's keyLogLine parses back to the same keys",
        seeds: {
            [
                Array((keys.keyLogLine + "\n").utf8),
                Array(("# HybridSim key log\r\nCLIENT_RANDOM 00 11\r\n" + String(keys.keyLogLine.map { $0 == " " ? "\t" : $0 }) + "\r\n\r\n").utf8),
            ]
        }
    ) { input in
        guard let parsed = try? SessionKeys.parseKeyLog(String(decoding: input, as: UTF8.self)) else { return .rejected }
        let sizes = parsed.allSatisfy {
            $0.initiatorEphemeral.count == 65 && $0.handshakeHash.count == 32 && $0.initiatorToResponder.count == 32
                && $0.responderToInitiator.count == 32
        }
        let again = try? SessionKeys.parseKeyLog(parsed.map(\.keyLogLine).joined(separator: "\n"))
        return FuzzTarget.check(sizes && again == parsed, "key log \(input.fuzzHex) does not survive being written again")
    }

    /// `TunnelRecording(decoding:)` (`relay --record` files): encode gives the input back; then
    /// the inspection with the session's key log and both diagrams.
    static let tunnelRecording = FuzzTarget(
        "tunnel-recording",
        "TunnelRecording(decoding:) then Inspector.inspect with a key log and both diagrams (inspect FILE); encode gives the input back, one inspected message per recorded one, diagrams escape peer text",
        seeds: {
            [
                recording(session, reason: "normal closure").encode(),
                recording([session[0]]).encode(),
                TunnelRecording(
                    startMilliseconds: 0, flow: .linked, tunnelID: Array(repeating: 1, count: 16), routingID: [1, 2, 3],
                    entries: [.init(nanoseconds: 5, event: .message(.creatorToJoiner, message1))]
                ).encode(),
            ]
        }
    ) { input in
        guard let recording = try? TunnelRecording(decoding: input) else { return .rejected }
        guard recording.encode() == input else {
            return .violation("recording \(input.fuzzHex) re-encodes as \(recording.encode().fuzzHex)")
        }
        let inspection = Inspector.inspect(recording, keyLog: [keys])
        guard inspection.messages.count == recording.messages.count else {
            return .violation("\(inspection.messages.count) messages inspected of \(recording.messages.count) in \(input.fuzzHex)")
        }
        if let problem = renderingProblem(inspection) { return .violation("\(problem), from \(input.fuzzHex)") }
        return .accepted
    }

    /// The input as plaintexts: records `flags ‖ length u16 ‖ bytes` (flags bit 0: from the
    /// desktop; a length past the end takes the rest).
    static func plaintexts(_ input: [UInt8]) -> [(fromDesktop: Bool, bytes: [UInt8])] {
        var out: [(fromDesktop: Bool, bytes: [UInt8])] = []
        var offset = 0
        while input.count - offset >= 3 {
            let length = Int(input[offset + 1]) << 8 | Int(input[offset + 2])
            let end = min(input.count, offset + 3 + length)
            out.append((input[offset] & 1 == 1, Array(input[(offset + 3)..<end])))
            offset = end
        }
        return out
    }

    /// The inverse of ``plaintexts(_:)``, for the seeds.
    static func records(_ plaintexts: [(fromDesktop: Bool, bytes: [UInt8])]) -> [UInt8] {
        plaintexts.flatMap { [$0.fromDesktop ? 1 : 0, UInt8($0.bytes.count >> 8), UInt8($0.bytes.count & 0xFF)] + $0.bytes }
    }

    /// The inspector's decoding of decrypted messages (post-handshake message, CTAP2 requests and
    /// responses, update and linking map, JSON, shutdown; annotated CBOR): the input's plaintexts
    /// are sealed into a recording under the logged keys, so the fuzzer reaches past the tags.
    static let inspectPlaintext = FuzzTarget(
        "inspect-plaintext",
        "Inspector.inspect on a recording of the input's plaintexts sealed under the key log's keys, and both diagrams; every message opens at its sequence number with its plaintext size, diagrams escape peer text",
        seeds: { [records(session), records([session[0], session[2], session[4]]), records([(false, [0xFF]), (true, [0x01])])] }
    ) { input in
        let plaintexts = plaintexts(input)
        let inspection = Inspector.inspect(recording(plaintexts), keyLog: [keys])
        guard inspection.keys == .matched, inspection.messages.count == plaintexts.count + 2 else {
            return .violation("keys \(inspection.keys), \(inspection.messages.count) messages for \(plaintexts.count) plaintexts of \(input.fuzzHex)")
        }
        var sequences: [Bool: Int] = [true: 0, false: 0]
        for (message, plaintext) in zip(inspection.messages.dropFirst(2), plaintexts) {
            let sequence = sequences[plaintext.fromDesktop, default: 0]
            sequences[plaintext.fromDesktop] = sequence + 1
            guard message.sequence == sequence, message.plaintextBytes == plaintext.bytes.count else {
                return .violation(
                    "message \(message.index) (\(message.title)) opened as sequence \(message.sequence ?? -1) with \(message.plaintextBytes ?? -1) bytes, sealed as \(sequence) with \(plaintext.bytes.count): \(input.fuzzHex)")
            }
        }
        if let problem = renderingProblem(inspection) { return .violation("\(problem), from \(input.fuzzHex)") }
        return .accepted
    }
}
