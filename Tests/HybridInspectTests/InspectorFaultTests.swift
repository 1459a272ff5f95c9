import CTAP2
import Foundation
import HybridCore
import HybridInspect
import Testing

/// What the inspector says of recordings a relay's faults (`relay --fault`) or a misbehaving peer
/// produce, in recordings made by hand (``HandMadeSession``).
@Suite("Inspect: faults and misbehaviour in hand-made recordings")
struct InspectorFaultTests {
    @Test("a cut message (relay --fault truncate=10@to-phone#2) is a shape anomaly, not keys that don't match")
    func truncatedMessageIsNotAKeyMismatch() throws {
        var session = try HandMadeSession.signIn()
        let request = session.transportIndexes[2]
        session.change(request) { Array($0.prefix(10)) }
        session.entries.removeSubrange((request + 1)..<(session.entries.count - 1))  // the phone gave up; the close stays
        let inspection = Inspector.inspect(session.recording, keyLog: [session.keys])
        #expect(inspection.keys == .matched, "\(inspection.keyDetail)")
        #expect(inspection.keyDetail.hasPrefix("key log entry 1 of 1 is this session's"), "\(inspection.keyDetail)")
        let cut = try #require(inspection.messages.last)
        #expect(cut.title == "malformed transport message")
        #expect(cut.anomalies.first == "10 bytes is not whole 32-byte padded blocks plus a 16-byte tag", "\(cut.anomalies)")
        #expect(inspection.messages.filter { $0.from == "phone" && $0.sequence != nil }.allSatisfy { $0.plaintextBytes != nil })
        // A cut that keeps the tag's length (40 bytes) is judged the same way.
        var longer = try HandMadeSession.signIn()
        longer.change(longer.transportIndexes[2]) { Array($0.prefix(40)) }
        #expect(Inspector.inspect(longer.recording, keyLog: [longer.keys]).keys == .matched)
    }

    @Test("a message the relay held back (relay --fault reorder=2s@to-desktop#2) is reordered, not a gap and a bad tag")
    func reorderedMessage() throws {
        var session = try HandMadeSession.signIn()
        let (postHandshake, update) = (session.transportIndexes[0], session.transportIndexes[1])
        var order = Array(session.entries.indices)
        order.swapAt(postHandshake, update)
        session.reorder(order)
        let inspection = Inspector.inspect(session.recording, keyLog: [session.keys])
        #expect(inspection.keys == .matched, "\(inspection.keyDetail)")
        #expect(inspection.messages[2].title == "update message")
        #expect(inspection.messages[2].anomalies == ["sequence 1 arrived before sequence 0 (reordered in transit: it was recorded later)"])
        #expect(inspection.messages[3].title == "post-handshake message", "decoded at the sequence it was sent with")
        #expect(inspection.messages[3].sequence == 0)
        #expect(inspection.messages[3].anomalies == ["reordered (sent as sequence 0, recorded after sequence 1)"])
        #expect(inspection.allAnomalies.count == 2, "\(inspection.allAnomalies)")
        // The gap said again is a reordering too, for tools.
        #expect(inspection.messages[2].anomalyKinds == [.reordered] && inspection.messages[3].anomalyKinds == [.reordered])

        // Two held back, one of them never recorded: the gap says what is still missing.
        var dropped = try HandMadeSession.signIn()
        let indexes = dropped.transportIndexes  // post-handshake, update, request, response, shutdown
        var changed = Array(dropped.entries.indices)
        changed.removeAll { $0 == indexes[0] || $0 == indexes[1] || $0 == indexes[3] }
        changed.insert(indexes[3], at: changed.firstIndex(of: indexes[2])!)  // the response first
        changed.insert(indexes[1], at: changed.firstIndex(of: indexes[2])! + 1)  // then the update
        dropped.reorder(changed)
        let partial = Inspector.inspect(dropped.recording, keyLog: [dropped.keys])
        let response = try #require(partial.messages.first { $0.title == "CTAP response: CTAP2_OK (0x00)" })
        #expect(response.anomalies.contains("sequence gap: expected 0, this is 2 (1 message(s) missing; 1 more arrived later, reordered)"),
                "\(response.anomalies)")
        #expect(response.anomalyKinds.contains(.sequenceGap) && !response.anomalyKinds.contains(.reordered), "still missing one: a gap")
    }

    @Test("a message recorded in the wrong direction is said to be, and the genuine ones after it are not called replayed")
    func wrongDirection() throws {
        var session = try HandMadeSession.signIn()
        session.change(session.transportIndexes[2], direction: .creatorToJoiner)  // the desktop's request, recorded as the phone's
        let inspection = Inspector.inspect(session.recording, keyLog: [session.keys])
        #expect(inspection.keys == .matched, "\(inspection.keyDetail)")
        let moved = try #require(inspection.messages.first { $0.title == "transport message recorded in the wrong direction" })
        #expect(moved.anomalies == [
            "recorded as the phone's, but it authenticates with the desktop-to-phone key at sequence 0: the recording's direction is wrong (not decoded)"
        ])
        #expect(moved.anomalyKinds == [.wrongDirection])
        // The phone's response after it and the desktop's shutdown: in order, nothing replayed, nothing missing.
        #expect(inspection.allAnomalies.count == 1, "\(inspection.allAnomalies)")

        // A message that belongs to neither direction (made up) uses no sequence number either.
        var foreign = try HandMadeSession.signIn()
        foreign.entries.insert(
            .init(nanoseconds: 0, event: .message(.creatorToJoiner, [UInt8](repeating: 0x5A, count: 48))), at: foreign.transportIndexes[2])
        let made = Inspector.inspect(foreign.recording, keyLog: [foreign.keys])
        #expect(!made.allAnomalies.contains { $0.contains("repeated") || $0.contains("gap") }, "\(made.allAnomalies)")
        #expect(made.allAnomalies.contains { $0.contains("bad tag") }, "\(made.allAnomalies)")
        #expect(made.messages.flatMap(\.anomalyKinds) == [.badTag], "\(made.allAnomalies)")
    }

    @Test("after 20 altered messages in a row, the genuine ones after them authenticate (not 'bad tag' for ever)")
    func longRunOfAlteredMessages() throws {
        var session = HandMadeSession()
        try session.phoneSends(PostHandshakeMessage(getInfo: CBOR.encode(SoftwareAuthenticator.getInfo.cbor)).encode())
        for _ in 0..<20 {
            try session.phoneSends(UpdateMessage.frame(linking: nil).bytes)
            session.change(session.entries.count - 1) { bytes in bytes.enumerated().map { $0 == 5 ? $1 ^ 0x01 : $1 } }
        }
        for _ in 0..<2 { try session.phoneSends(UpdateMessage.frame(linking: nil).bytes) }
        let inspection = Inspector.inspect(session.recording, keyLog: [session.keys])
        #expect(inspection.keys == .matched, "\(inspection.keyDetail)")
        let genuine = inspection.messages.suffix(2)
        #expect(genuine.map(\.sequence) == [21, 22])
        #expect(genuine.allSatisfy { $0.title == "update message" && $0.anomalies.isEmpty }, "\(genuine.map(\.anomalies))")
        #expect(inspection.allAnomalies.filter { $0.contains("bad tag") }.count == 20, "\(inspection.allAnomalies)")
    }

    @Test("an error status with a success body behind it (phone --misbehave wrong-ctap-status) is flagged")
    func errorStatusWithABody() throws {
        let body = CBOR.encode([1: ["id": .bytes([1, 2, 3]), "type": "public-key"], 3: .bytes([UInt8](repeating: 3, count: 70))])
        let session = try HandMadeSession.signIn(response: [0x7F] + body)
        let inspection = Inspector.inspect(session.recording, keyLog: [session.keys])
        let response = try #require(inspection.messages.first { $0.title.hasPrefix("CTAP response") })
        #expect(response.anomalies == [
            "an error status followed by \(body.count) bytes: an error response is its status byte alone (the desktop takes the error)"
        ], "\(response.title): \(response.anomalies)")
        // An error status alone is an answer like any other.
        let denied = try HandMadeSession.signIn(response: [CTAP2StatusCode.operationDenied.rawValue])
        #expect(Inspector.inspect(denied.recording, keyLog: [denied.keys]).allAnomalies.isEmpty)
    }

    @Test("a session that ends without the desktop's shutdown (desktop --misbehave no-shutdown): a note, not an anomaly")
    func noShutdown() throws {
        let session = try HandMadeSession.signIn(shutdown: false)
        let inspection = Inspector.inspect(session.recording, keyLog: [session.keys])
        #expect(inspection.allAnomalies.isEmpty, "\(inspection.allAnomalies)")
        #expect(inspection.notes == [
            "no shutdown message from the desktop: tolerated (the transaction was over; the phone takes the tunnel's close as the end), "
                + "though a Chromium desktop sends one (PROTOCOL §10)"
        ])
        let text = SequenceDiagram.text(inspection)
        #expect(text.contains("\nnote: no shutdown message from the desktop") && text.hasSuffix("no anomalies\n"), "\(text)")
        #expect(SequenceDiagram.svg(inspection).contains("note: no shutdown message from the desktop"))
        // With the shutdown: no note.
        let complete = try HandMadeSession.signIn()
        #expect(Inspector.inspect(complete.recording, keyLog: [complete.keys]).notes.isEmpty)
    }

    @Test("inspect --json: the members Docs/INSPECT.md lists, and the close code as a number")
    func jsonMembers() throws {
        let session = try HandMadeSession.signIn()
        let inspection = Inspector.inspect(session.recording, keyLog: [session.keys])
        #expect(inspection.closeCode == 1000)
        let object = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(inspection)) as? [String: Any])
        let (sessionMembers, messageMembers) = try Self.documentedMembers()
        #expect(Set(object.keys) == sessionMembers, "the session's members against Docs/INSPECT.md's table")
        #expect(object["closeCode"] as? Int == 1000 && object["keys"] as? String == "matched")
        let messages = try #require(object["messages"] as? [[String: Any]])
        let always: Set = ["index", "milliseconds", "from", "to", "bytes", "title", "details", "anomalies", "anomalyKinds"]
        #expect(always.isSubset(of: messageMembers))
        #expect(Set(messages[0].keys) == always, "a handshake message: no sequence")
        #expect(Set(messages[4].keys) == messageMembers, "the CTAP request has them all (against Docs/INSPECT.md's table)")
        // No close record: no closeCode member.
        var unclosed = session
        unclosed.entries.removeLast()
        let open = try JSONSerialization.jsonObject(with: JSONEncoder().encode(Inspector.inspect(unclosed.recording))) as? [String: Any]
        #expect(open?["closeCode"] == nil && open?["closure"] as? String == "the recording has no closing record")
    }

    @Test("every anomaly kind is in Docs/INSPECT.md's anomaly table, and every kind there is one; each anomaly has its kind")
    func anomalyKindsDocumented() throws {
        let page = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Docs/INSPECT.md")
        let text = try String(contentsOf: page, encoding: .utf8)
        let start = try #require(text.range(of: "| anomaly | `anomalyKinds` name | meaning |"))
        let rows = text[start.upperBound...].split(separator: "\n").prefix { $0.hasPrefix("|") }.dropFirst()
        let named = rows.flatMap { row in
            row.split(separator: "|")[1].split(separator: "`").enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
        }
        #expect(Set(named) == Set(Inspection.AnomalyKind.allCases.map(\.rawValue)))
        #expect(named.count == Inspection.AnomalyKind.allCases.count, "each kind once")

        // A session with anomalies of both levels: one kind per sentence, in the JSON too.
        var session = try HandMadeSession.signIn()
        session.change(session.transportIndexes[2]) { bytes in bytes.enumerated().map { $0.offset == 5 ? $0.element ^ 1 : $0.element } }  // the request
        let inspection = Inspector.inspect(session.recording, keyLog: [session.keys], qrURL: "FIDO:/0")
        #expect(inspection.anomalyKinds == [.qrUnreadable], "\(inspection.anomalies)")
        for message in inspection.messages { #expect(message.anomalyKinds.count == message.anomalies.count, "\(message.anomalies)") }
        #expect(inspection.messages.flatMap(\.anomalyKinds).contains(.badTag))
        let object = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(inspection)) as? [String: Any])
        #expect(object["anomalyKinds"] as? [String] == ["qrUnreadable"])
        #expect((object["messages"] as? [[String: Any]])?.contains { ($0["anomalyKinds"] as? [String]) == ["badTag"] } == true)
    }

    /// The members Docs/INSPECT.md's two JSON tables list (the session's, then each message's):
    /// every backquoted name in a row's first cell.
    static func documentedMembers() throws -> (session: Set<String>, message: Set<String>) {
        let page = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Docs/INSPECT.md")
        let text = try String(contentsOf: page, encoding: .utf8)
        func table(after heading: String) throws -> Set<String> {
            let start = try #require(text.range(of: heading), "Docs/INSPECT.md no longer says \(heading)")
            let rows = text[start.upperBound...].split(separator: "\n").drop { !$0.hasPrefix("|") }.prefix { $0.hasPrefix("|") }
            let cells = rows.dropFirst(2).compactMap { $0.split(separator: "|").first }
            return Set(cells.flatMap { $0.split(separator: "`").enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) } })
        }
        return (try table(after: "The session's members:"), try table(after: "Each message:"))
    }
}
