import HybridCore
import Testing

/// The tunnel recording file format (version 1) and the key-log line format: round trips, the exact
/// header layout, and a specific error for every kind of truncation and corruption.
@Suite("Inspect: recording and key-log formats")
struct RecordingFormatTests {
    static let sample = TunnelRecording(
        startMilliseconds: 0x0102_0304_0506, flow: .qr, tunnelID: Array(0..<16), routingID: [0xAA, 0xBB, 0xCC],
        entries: [
            .init(nanoseconds: 10, event: .attached(.creator)),
            .init(nanoseconds: 20, event: .attached(.joiner)),
            .init(nanoseconds: 30, event: .message(.joinerToCreator, [1, 2, 3])),
            .init(nanoseconds: 40, event: .message(.creatorToJoiner, [])),
            .init(nanoseconds: 50, event: .closed(code: 1000, reason: "bye")),
        ])

    @Test func roundTrip() throws {
        let bytes = Self.sample.encode()
        #expect(try TunnelRecording(decoding: bytes) == Self.sample)
        let linked = TunnelRecording(startMilliseconds: 1, flow: .linked, tunnelID: Array(repeating: 9, count: 16),
                                     routingID: [1, 2, 3], entries: [.init(nanoseconds: 0, event: .closed(code: nil, reason: ""))])
        #expect(try TunnelRecording(decoding: linked.encode()) == linked)
    }

    @Test func knownLayout() {
        let bytes = Self.sample.encode()
        #expect(Array(bytes.prefix(8)) == Array("HSIMREC".utf8) + [1])
        #expect(Array(bytes[8..<16]) == [0, 0, 1, 2, 3, 4, 5, 6])  // start, big-endian ms
        #expect(bytes[16] == 1)  // flow: QR
        #expect(Array(bytes[17..<33]) == Array(0..<16))
        #expect(Array(bytes[33..<36]) == [0xAA, 0xBB, 0xCC])
        #expect(Array(bytes[36..<46]) == [2, 0, 0, 0, 0, 0, 0, 0, 10, 0])  // attached, time 10, creator
        // message record: kind 1, time 30, direction 1, length 3, bytes
        #expect(Array(bytes[56..<73]) == [1, 0, 0, 0, 0, 0, 0, 0, 30, 1, 0, 0, 0, 3, 1, 2, 3])
        // close record: kind 3, time 50, code 1000, reason length 3, "bye"
        #expect(Array(bytes.suffix(16)) == [3, 0, 0, 0, 0, 0, 0, 0, 50, 0x03, 0xE8, 0, 3] + Array("bye".utf8))
        #expect(bytes.count == 36 + 10 + 10 + 17 + 14 + 16)
    }

    @Test func unclosedRecordingIsWrittenClosed() throws {
        var open = Self.sample
        open.entries.removeLast()
        let decoded = try TunnelRecording(decoding: open.encode())
        #expect(decoded.entries.last?.event == .closed(code: nil, reason: "recording ended"))
    }

    @Test func everyTruncationIsReported() {
        let bytes = Self.sample.encode()
        for length in 0..<bytes.count {
            let cut = Array(bytes.prefix(length))
            #expect(throws: RecordingError.self) { try TunnelRecording(decoding: cut) }
        }
        // Inside the message body: says what it was reading and how much was missing.
        #expect(throws: RecordingError.truncated(offset: 70, needed: 3, available: 2, what: "a message of 3 bytes")) {
            try TunnelRecording(decoding: Array(bytes.prefix(72)))
        }
        // At a record boundary: the missing close record.
        #expect(throws: RecordingError.missingClose(records: 4)) { try TunnelRecording(decoding: Array(bytes.prefix(bytes.count - 16))) }
        #expect(throws: RecordingError.notARecording) { try TunnelRecording(decoding: Array(bytes.prefix(3))) }
    }

    @Test func corruptionIsReported() {
        let bytes = Self.sample.encode()
        func corrupted(_ offset: Int, _ value: UInt8) -> [UInt8] {
            var copy = bytes
            copy[offset] = value
            return copy
        }
        #expect(throws: RecordingError.notARecording) { try TunnelRecording(decoding: corrupted(0, UInt8(ascii: "X"))) }
        #expect(throws: RecordingError.unsupportedVersion(2)) { try TunnelRecording(decoding: corrupted(7, 2)) }
        #expect(throws: RecordingError.invalidField(offset: 16, "flow 7 (expected 1 or 2)")) { try TunnelRecording(decoding: corrupted(16, 7)) }
        #expect(throws: RecordingError.unknownRecordKind(9, offset: 36)) { try TunnelRecording(decoding: corrupted(36, 9)) }
        #expect(throws: RecordingError.invalidField(offset: 45, "side 4 (expected 0 or 1)")) { try TunnelRecording(decoding: corrupted(45, 4)) }
        #expect(throws: RecordingError.invalidField(offset: 65, "direction 2 (expected 0 or 1)")) { try TunnelRecording(decoding: corrupted(65, 2)) }
        #expect(throws: RecordingError.invalidField(offset: 57, "record time goes backwards")) { try TunnelRecording(decoding: corrupted(64, 1)) }
        #expect(throws: RecordingError.invalidField(offset: 66, "message length 4278190083 above 16777216")) {
            try TunnelRecording(decoding: corrupted(66, 0xFF))
        }
        #expect(throws: RecordingError.trailingBytes(offset: bytes.count, count: 1)) { try TunnelRecording(decoding: bytes + [0]) }
        #expect(throws: RecordingError.invalidField(offset: bytes.count - 3, "close reason is not UTF-8")) {
            try TunnelRecording(decoding: corrupted(bytes.count - 3, 0xFF))
        }
    }

    @Test func keyLogRoundTripAndErrors() throws {
        let keys = SessionKeys(initiatorEphemeral: [4] + Array(repeating: 1, count: 64), handshakeHash: Array(repeating: 2, count: 32),
                               initiatorToResponder: Array(repeating: 3, count: 32), responderToInitiator: Array(repeating: 0xAB, count: 32))
        let line = keys.keyLogLine
        #expect(line.hasPrefix("HYBRID_SESSION_KEYS 0401010101"))
        #expect(line.hasSuffix(String(repeating: "ab", count: 32)))
        let text = "# comment\nCLIENT_RANDOM aa bb\n\n" + line + "\r\n" + line.uppercased() + "\n"
        #expect(try SessionKeys.parseKeyLog(text) == [keys, keys])
        // Tabs (and runs of them) separate fields as spaces do: such a line is read, not skipped.
        let tabbed = line.replacingOccurrences(of: " ", with: "\t") + "\n" + line.replacingOccurrences(of: " ", with: " \t ")
        #expect(try SessionKeys.parseKeyLog(tabbed) == [keys, keys])
        #expect(try SessionKeys.parseKeyLog("\u{FEFF}" + line) == [keys], "a byte-order mark does not hide the first line")
        // Lines of another label are counted (a file with only those is another file); comments and
        // blank lines are not.
        #expect(try SessionKeys.readKeyLog(text).otherLines == 1)
        #expect(try SessionKeys.readKeyLog("# only a comment\n\n").otherLines == 0)
        #expect(try SessionKeys.readKeyLog("HSREC\u{1}\u{2} binary\n").otherLines == 1)
        #expect(throws: HybridError.self) { try SessionKeys.parseKeyLog("HYBRID_SESSION_KEYS 00 11") }
        do {
            _ = try SessionKeys.parseKeyLog("\n" + String(line.dropLast(2)))
            Issue.record("a short key was accepted")
        } catch {
            let reason = (error as Error as? HybridError)?.reason ?? ""
            #expect(reason.hasPrefix("key log line 2:"))
        }
    }
}
