import CTAP2
import Crypto
import Foundation
import HybridCore
import HybridInspect
import HybridRuntime
import Synchronization
import Testing

let exampleRP = RelyingParty(id: "example.com", origin: "https://example.com")

/// Real sessions over the loopback relay with `--record` and key logging on both sides, then
/// inspected: every message decoded, byte counts equal to the relay's record, and the wrong-key cases.
@Suite("Inspect: recorded loopback sessions", .serialized, .timeLimit(.minutes(1)))
struct InspectorLoopbackTests {
    /// Key-log lines of both sides, in arrival order.
    final class KeyCollector: Sendable {
        let entries = Mutex<[(side: String, keys: SessionKeys)]>([])
        var hook: @Sendable (String, SessionKeys) -> Void { { side, keys in self.entries.withLock { $0.append((side, keys)) } } }
        var desktopKeys: [SessionKeys] { entries.withLock { $0.filter { $0.side == "desktop" }.map(\.keys) } }
        var phoneKeys: [SessionKeys] { entries.withLock { $0.filter { $0.side == "phone" }.map(\.keys) } }
    }

    /// A relay recording into a fresh directory.
    static func recordingHarness() async throws -> (HybridHarness, URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hsrec-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var configuration = RelayConfiguration()
        configuration.recordDirectory = directory.path
        return (try await HybridHarness.start(configuration: configuration), directory)
    }

    /// The recordings in `directory`, oldest first, once `count` exist (the relay writes a file when
    /// its tunnel closes, just after the peers finish).
    static func recordings(in directory: URL, count: Int) async throws -> [TunnelRecording] {
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".hsrec") }.sorted()
            if names.count >= count || ContinuousClock.now > deadline {
                return try names.map { try TunnelRecording(decoding: Array(Data(contentsOf: directory.appendingPathComponent($0)))) }
                    .sorted { $0.startMilliseconds < $1.startMilliseconds }
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// A recording relay, a key collector and transaction options that log keys into it.
    static func lab() async throws -> (HybridHarness, URL, KeyCollector, HybridHarness.TransactionOptions) {
        let (harness, directory) = try await recordingHarness()
        let collector = KeyCollector()
        var options = HybridHarness.TransactionOptions()
        options.keyLog = collector.hook
        return (harness, directory, collector, options)
    }

    /// A QR registration and a QR sign-in of `userName` on a fresh phone.
    static func registerAndSignIn(_ harness: HybridHarness, _ userName: String, _ options: HybridHarness.TransactionOptions) async throws {
        let phone = SimulatedPhone()
        let credential = try await harness.register(on: phone, relyingParty: exampleRP, userName: userName, options: options)
        _ = try await harness.signIn(on: phone, relyingParty: exampleRP, knownCredentials: [credential], options: options)
    }

    static func message(_ title: String, in inspection: Inspection) -> Inspection.Message? {
        inspection.messages.first { $0.title == title }
    }

    @Test func qrRegistrationAndSignInDecodeCompletely() async throws {
        let (harness, directory, collector, options) = try await Self.lab()
        defer { Task { await harness.shutdown() } }
        defer { try? FileManager.default.removeItem(at: directory) }
        try await Self.registerAndSignIn(harness, "alice", options)

        // Both sides logged the same keys (they derived them independently).
        #expect(collector.desktopKeys.count == 2)
        #expect(collector.desktopKeys == collector.phoneKeys)

        let recordings = try await Self.recordings(in: directory, count: 2)
        try #require(recordings.count == 2)
        for (recording, request) in zip(recordings, ["authenticatorMakeCredential", "authenticatorGetAssertion"]) {
            #expect(recording.flow == .qr)
            let inspection = Inspector.inspect(recording, keyLog: collector.desktopKeys)
            #expect(inspection.keys == .matched)
            #expect(inspection.allAnomalies == [])
            // Every recorded message is decoded, byte counts equal to the relay's record.
            #expect(inspection.messages.map(\.bytes) == recording.messages.map(\.bytes.count))
            // The phone sends its update right after the post-handshake message, and the desktop its
            // request as soon as the post-handshake message arrived: those two may be relayed in
            // either order. Everything else is in protocol order.
            let titles = inspection.messages.map(\.title)
            #expect(titles.prefix(3) == ["Noise KNpsk0 message 1", "Noise KNpsk0 message 2", "post-handshake message"])
            #expect(titles.suffix(2) == ["CTAP response: CTAP2_OK (0x00)", "shutdown"])
            #expect(Set(titles[3..<5]) == ["update message", "CTAP request: \(request)"])
            for message in inspection.messages.dropFirst(2) {
                #expect(message.plaintextBytes != nil)
            }
            let from = Dictionary(inspection.messages.map { ($0.title, $0.from) }, uniquingKeysWith: { a, _ in a })
            #expect(from["update message"] == "phone" && from["CTAP request: \(request)"] == "desktop" && from["shutdown"] == "desktop")
            // The phone's update message: padded to 528 bytes on the wire whether or not it links.
            #expect(Self.message("update message", in: inspection)?.bytes == 528)
            #expect(inspection.messages[2].details.contains { $0.hasPrefix("  1 (versions)") })
            #expect(Self.message("CTAP request: \(request)", in: inspection)?.details.contains { $0.hasPrefix("1 (") } == true)
            let text = SequenceDiagram.text(inspection)
            #expect(text.contains("no anomalies"))
            #expect(SequenceDiagram.svg(inspection).hasPrefix("<svg"))
        }
        // The sign-in request names the relying party.
        let signIn = Inspector.inspect(recordings[1], keyLog: collector.desktopKeys)
        #expect(Self.message("CTAP request: authenticatorGetAssertion", in: signIn)?.details.contains("1 (rpId): \"example.com\"") == true)
        // Every authenticator-data flag by name: the software authenticator's passkeys are synced (BE, BS).
        let signInFlags = Self.message("CTAP response: CTAP2_OK (0x00)", in: signIn)?.details.first { $0.contains("(authData)") }
        #expect(signInFlags?.contains("flags 0x1d [UP, UV, BE, BS], signCount 1") == true, "\(signInFlags ?? "no authData line")")
        let registration = Inspector.inspect(recordings[0], keyLog: collector.desktopKeys)
        let registrationFlags = Self.message("CTAP response: CTAP2_OK (0x00)", in: registration)?.details.first { $0.contains("(authData)") }
        #expect(registrationFlags?.contains("flags 0x5d [UP, UV, BE, BS, AT]") == true, "\(registrationFlags ?? "no authData line")")
    }

    @Test func wrongKeysAreSaidNotToMatch() async throws {
        let (harness, directory, collector, options) = try await Self.lab()
        defer { Task { await harness.shutdown() } }
        defer { try? FileManager.default.removeItem(at: directory) }
        try await Self.registerAndSignIn(harness, "bob", options)
        let recordings = try await Self.recordings(in: directory, count: 2)
        try #require(recordings.count == 2 && collector.desktopKeys.count == 2)

        // Another session's key log: no entry for this handshake.
        let other = Inspector.inspect(recordings[1], keyLog: [collector.desktopKeys[0]])
        #expect(other.keys == .noEntry)
        #expect(other.keyDetail.contains("the keys don't match"))
        #expect(other.messages.allSatisfy { $0.plaintextBytes == nil && ($0.sequence == nil || $0.details.isEmpty) })

        // The right entry with a wrong phone-to-desktop key: none of the phone's messages is decoded,
        // and the detail names that half; the desktop's messages still are (their key is right).
        var forged = collector.desktopKeys[1]
        forged.responderToInitiator[0] ^= 1
        let mismatch = Inspector.inspect(recordings[1], keyLog: [forged])
        #expect(mismatch.keys == .mismatch)
        #expect(mismatch.keyDetail.contains("phone-to-desktop key authenticates none of that direction's messages: the keys don't match"),
                "\(mismatch.keyDetail)")
        let fromPhone = mismatch.messages.filter { $0.from == "phone" && $0.sequence != nil }
        #expect(!fromPhone.isEmpty && fromPhone.allSatisfy { $0.plaintextBytes == nil && $0.title.contains("the keys don't match") })
        #expect(mismatch.messages.contains { $0.from == "desktop" && $0.plaintextBytes != nil })
        #expect(!mismatch.allAnomalies.contains { $0.contains("bad tag") }, "a wrong key is not tampering")

        // Both halves wrong: nothing is decoded.
        forged.initiatorToResponder[0] ^= 1
        let wrong = Inspector.inspect(recordings[1], keyLog: [forged])
        #expect(wrong.keys == .mismatch)
        #expect(wrong.keyDetail.contains("authenticates none of its transport messages"), "\(wrong.keyDetail)")
        #expect(wrong.messages.allSatisfy { $0.plaintextBytes == nil })

        // A shared key log with a damaged copy of this session's entry before the right one (and an
        // identical copy of the damaged one, as desktop and phone both log): the right one is used.
        let shared = [collector.desktopKeys[0], forged, forged, collector.desktopKeys[1]]
        let found = Inspector.inspect(recordings[1], keyLog: shared)
        #expect(found.keys == .matched, "\(found.keyDetail)")
        #expect(found.keyDetail.hasPrefix("key log entry 4 of 4 is this session's"), "\(found.keyDetail)")
        #expect(found.allAnomalies.isEmpty, "\(found.allAnomalies)")
        // Only damaged copies: still said not to match; two different ones too (it looped forever),
        // and a thousand different ones end after a bounded number of tries.
        #expect(Inspector.inspect(recordings[1], keyLog: [forged, forged]).keys == .mismatch)
        var otherForged = forged
        otherForged.initiatorToResponder[1] ^= 1
        #expect(Inspector.inspect(recordings[1], keyLog: [forged, otherForged]).keys == .mismatch)
        let many = (0..<1000).map { index -> SessionKeys in
            var keys = forged
            keys.responderToInitiator[2] = UInt8(index & 0xFF)
            keys.responderToInitiator[3] = UInt8(index >> 8)
            return keys
        }
        #expect(Inspector.inspect(recordings[1], keyLog: many).keys == .mismatch)
    }

    /// `recording` with one bit of a transport message flipped: the first (or, with `last`, the
    /// last) message in `direction` after the handshake, at `byte`, by `mask`.
    static func flipping(
        _ recording: TunnelRecording, _ direction: TunnelRecording.Direction, last: Bool = false, byte: Int, mask: UInt8
    ) throws -> TunnelRecording {
        func isTransport(_ entry: TunnelRecording.Entry) -> Bool {
            if case .message(let way, let bytes) = entry.event { return way == direction && bytes.count != HybridConstants.handshakeMessageSize }
            return false
        }
        var changed = recording
        let index = try #require(last ? changed.entries.lastIndex(where: isTransport) : changed.entries.firstIndex(where: isTransport))
        if case .message(let way, var bytes) = changed.entries[index].event {
            bytes[byte] ^= mask
            changed.entries[index].event = .message(way, bytes)
        }
        return changed
    }

    @Test func tamperingAndGapsAreFlagged() async throws {
        let (harness, directory, collector, options) = try await Self.lab()
        defer { Task { await harness.shutdown() } }
        defer { try? FileManager.default.removeItem(at: directory) }
        _ = try await harness.register(on: SimulatedPhone(), relyingParty: exampleRP, userName: "carol", options: options)
        let recording = try #require(try await Self.recordings(in: directory, count: 1).first)
        let keys = collector.desktopKeys

        // A flipped bit in the CTAP response ciphertext: a bad tag on that message only.
        let tampered = try Self.flipping(recording, .creatorToJoiner, last: true, byte: 10, mask: 0x01)
        let badTag = Inspector.inspect(tampered, keyLog: keys)
        #expect(badTag.keys == .matched)
        #expect(badTag.allAnomalies.contains { $0.contains("bad tag") })

        // The request altered (the desktop's first transport message): flagged there; its response
        // is not a second anomaly ("a response without a request"), only a knock-on of the first.
        let request = try Self.flipping(recording, .joinerToCreator, byte: 12, mask: 0x01)
        let unread = Inspector.inspect(request, keyLog: keys)
        #expect(unread.messages.contains { $0.title == "encrypted transport message that does not authenticate" }, "\(unread.messages.map(\.title))")
        #expect(!unread.allAnomalies.contains("a response without a request"), "\(unread.allAnomalies)")

        // A flipped bit in the phone's first transport message (the post-handshake message, what
        // `relay --fault corrupt@to-desktop#2` hits): its later messages authenticate, so the key
        // is right and that one was altered, not "the keys don't match".
        let first = try Self.flipping(recording, .creatorToJoiner, byte: 20, mask: 0x80)
        let altered = Inspector.inspect(first, keyLog: keys)
        #expect(altered.keys == .matched, "\(altered.keyDetail)")
        let alteredMessage = try #require(altered.messages.first { $0.from == "phone" && $0.sequence == 0 })
        #expect(alteredMessage.anomalies.contains { $0.hasPrefix("bad tag: does not authenticate with the logged key at sequence 0 (altered in transit)") },
                "\(alteredMessage.anomalies)")
        #expect(altered.messages.contains { $0.title == "update message" })

        // No handshake in the recording (no message at all): not keys that do not match.
        var empty = recording
        empty.entries.removeAll { entry in
            if case .message = entry.event { return true } else { return false }
        }
        let incomplete = Inspector.inspect(empty, keyLog: keys)
        #expect(incomplete.keys == .noHandshake, "\(incomplete.keyDetail)")
        #expect(incomplete.keyDetail.hasPrefix("the recording holds no handshake"))
        #expect(incomplete.allAnomalies.contains("no handshake: the desktop sent nothing"))

        // A close reason a peer chose, with a terminal escape and a line break: escaped in the text
        // (one line, nothing repainted) and in the SVG (which must stay well-formed XML).
        var hostile = recording
        hostile.entries.append(.init(nanoseconds: 1, event: .closed(code: 4001, reason: "\u{1B}[2J\u{7}\nerror: forged line\u{200F}\u{61C}<\u{301}")))
        let inspected = Inspector.inspect(hostile, keyLog: keys)
        let text = SequenceDiagram.text(inspected)
        #expect(!text.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 }, "\(text)")
        #expect(!text.split(separator: "\n").contains { $0.hasPrefix("error: forged") }, "\(text)")
        #expect(text.contains("\\u{1B}[2J\\u{7}\\u{A}error: forged line\\u{200F}\\u{61C}"), "\(text)")
        let svg = SequenceDiagram.svg(inspected)
        #expect(!svg.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" }, "no control character in the SVG")
        // Bidi marks are shown, not obeyed; '<' with a combining mark is still markup to escape.
        #expect(!svg.unicodeScalars.contains { $0.value == 0x200F || $0.value == 0x61C }, "no bidi mark in the SVG")
        #expect(svg.contains("&lt;\u{301}"), "the '<' escaped although a combining mark follows it")

        // The update message dropped: the response arrives with sequence 2 where 1 was expected.
        var gapped = recording
        let updateIndex = try #require(gapped.entries.firstIndex { entry in
            if case .message(.creatorToJoiner, let bytes) = entry.event { return bytes.count == 528 } else { return false }
        })
        gapped.entries.remove(at: updateIndex)
        let gap = Inspector.inspect(gapped, keyLog: keys)
        #expect(gap.allAnomalies.contains { $0.contains("sequence gap: expected 1, this is 2 (1 message(s) missing)") })
        #expect(gap.messages.contains { $0.title == "CTAP response: CTAP2_OK (0x00)" })
    }

    @Test func linkedSignInIsDecoded() async throws {
        let (harness, directory, collector, options) = try await Self.lab()
        defer { Task { await harness.shutdown() } }
        defer { try? FileManager.default.removeItem(at: directory) }
        let phone = LinkedPhone(name: "Pixel")
        let (credential, link) = try await harness.registerAndLink(on: phone, relyingParty: exampleRP, userName: "dave", options: options)
        _ = try await harness.signInLinked(on: phone, link: link, relyingParty: exampleRP, knownCredentials: [credential], options: options)
        let recordings = try await Self.recordings(in: directory, count: 2)
        try #require(recordings.count == 2)
        let linkedRecording = try #require(recordings.first { $0.flow == .linked })
        let linked = Inspector.inspect(linkedRecording, keyLog: collector.desktopKeys)
        #expect(linked.pattern == "Noise_NKpsk0_P256_AESGCM_SHA256")
        #expect(linked.keys == .matched)
        #expect(linked.allAnomalies == [])
        #expect(linked.messages.map(\.title) == [
            "Noise NKpsk0 message 1", "Noise NKpsk0 message 2", "post-handshake message",
            "CTAP request: authenticatorGetAssertion", "CTAP response: CTAP2_OK (0x00)", "shutdown",
        ])
        #expect(linked.messages.map(\.bytes) == linkedRecording.messages.map(\.bytes.count))
        // The QR registration carried the linking information, decoded with its fields.
        let qrRecording = try #require(recordings.first { $0.flow == .qr })
        let registration = Inspector.inspect(qrRecording, keyLog: collector.desktopKeys)
        let update = try #require(Self.message("update message", in: registration))
        #expect(update.details.contains("  5 (name): \"Pixel\""))
        #expect(update.details.contains("  3 (linkSecret): 32 secret bytes (not shown)"))
        #expect(!update.details.joined().contains(Hex.encode(link.linkSecret)))
        // The JSON form: the linking map decoded, its secret a count, and no payload hex to find it in.
        #expect(update.payload == nil)
        guard case .map(let members) = update.cbor, case .map(let linking) = members["1"] else {
            Issue.record("the update message's cbor is not a map with a linking map: \(String(describing: update.cbor))")
            return
        }
        #expect(linking["3"] == .secret(32))
        #expect(linking["5"] == .text("Pixel"))
        let json = String(decoding: try JSONEncoder().encode(registration), as: UTF8.self)
        #expect(!json.contains(Hex.encode(link.linkSecret)))
    }

    @Test("inspect --json: the decrypted payloads in hex and their CBOR decoded, for tools; the JSON reads back the same")
    func structuredMessages() async throws {
        let (harness, directory, collector, options) = try await Self.lab()
        defer { Task { await harness.shutdown() } }
        defer { try? FileManager.default.removeItem(at: directory) }
        try await Self.registerAndSignIn(harness, "erin", options)
        let recordings = try await Self.recordings(in: directory, count: 2)
        try #require(recordings.count == 2)
        let signIn = Inspector.inspect(recordings[1], keyLog: collector.desktopKeys)

        let request = try #require(Self.message("CTAP request: authenticatorGetAssertion", in: signIn))
        #expect(request.payload?.hasPrefix("02") == true, "the command byte, then the CBOR")
        #expect(request.payload.map { $0.count / 2 } == request.plaintextBytes.map { $0 - 1 }, "the payload is the frame after its type byte")
        guard case .map(let asked) = request.cbor else {
            Issue.record("no decoded request: \(String(describing: request.cbor))")
            return
        }
        #expect(asked["1"] == .text("example.com"))
        guard case .bytes(let clientDataHash, nil) = asked["2"] else {
            Issue.record("clientDataHash is not a byte string: \(String(describing: asked["2"]))")
            return
        }
        #expect(clientDataHash.count == 32)

        let response = try #require(Self.message("CTAP response: CTAP2_OK (0x00)", in: signIn))
        #expect(response.payload?.hasPrefix("00") == true)
        guard case .map(let answered) = response.cbor, case .bytes(let authData, _) = answered["2"] else {
            Issue.record("no authData in the decoded response: \(String(describing: response.cbor))")
            return
        }
        #expect(authData.count == 37 && authData[32] == 0x1D, "rpIdHash, flags UP UV BE BS, signCount")

        // The post-handshake message's getInfo bytes are shown decoded beside their hex.
        guard case .map(let postHandshake) = signIn.messages[2].cbor, case .bytes(_, let getInfo?) = postHandshake["1"],
            case .map(let info) = getInfo
        else {
            Issue.record("no nested getInfo: \(String(describing: signIn.messages[2].cbor))")
            return
        }
        guard case .array(let versions) = info["1"] else {
            Issue.record("getInfo has no versions: \(info)")
            return
        }
        #expect(versions.contains(.text("FIDO_2_0")), "\(versions)")

        // The JSON members as a tool reads them, and the whole document read back unchanged.
        let data = try JSONEncoder().encode(signIn)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let messages = try #require(object["messages"] as? [[String: Any]])
        let requestJSON = try #require(messages.first { ($0["title"] as? String) == request.title })
        let cbor = try #require(requestJSON["cbor"] as? [String: Any])
        #expect(cbor["1"] as? String == "example.com")
        #expect((cbor["2"] as? [String: Any])?["bytes"] as? String == Hex.encode(clientDataHash))
        #expect(try JSONDecoder().decode(Inspection.self, from: data) == signIn)
    }

    @Test("DecodedCBOR: every CBOR kind in JSON and back, integers at the 64-bit edges")
    func decodedCBORForms() throws {
        let value: CBORValue = .map([
            1: .unsigned(.max), 2: .negative(.max), 3: -5, "text": "x", 4: .bytes([1, 2]), 5: [true, .null, .undefined],
        ])
        let decoded = DecodedCBOR(value)
        guard case .map(let members) = decoded else {
            Issue.record("not a map: \(decoded)")
            return
        }
        #expect(members["1"] == .bigInteger("18446744073709551615"))
        #expect(members["2"] == .bigInteger("-18446744073709551616"))
        #expect(members["3"] == .integer(-5))
        #expect(members["text"] == .text("x"))
        #expect(members["4"] == .bytes([1, 2], nested: nil))
        let json = String(decoding: try Self.sortedEncoder.encode(decoded), as: UTF8.self)
        #expect(json == #"{"1":{"integer":"18446744073709551615"},"2":{"integer":"-18446744073709551616"},"3":-5,"4":{"bytes":"0102"},"5":[true,null,{"undefined":true}],"text":"x"}"#)
        #expect(try JSONDecoder().decode(DecodedCBOR.self, from: Data(json.utf8)) == decoded)
        // The forms only the inspector makes: a hidden secret and bytes shown with the item they hold.
        let made: DecodedCBOR = .map(["3": .secret(32), "1": .bytes([0xA1, 0x01, 0x02], nested: .map(["1": .integer(2)]))])
        let madeJSON = String(decoding: try Self.sortedEncoder.encode(made), as: UTF8.self)
        #expect(madeJSON == #"{"1":{"bytes":"a10102","cbor":{"1":2}},"3":{"secretBytes":32}}"#)
        #expect(try JSONDecoder().decode(DecodedCBOR.self, from: Data(madeJSON.utf8)) == made)
    }

    static var sortedEncoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }

    /// A phone that sends its linking information in the post-handshake message (key 2), as some do,
    /// in a recording made by hand: the link secret is in neither the text nor the JSON, not even
    /// in part, whether key 2 holds a linking map or bytes.
    @Test("linking information in the post-handshake message: the link secret appears nowhere in the inspection, not even 8 bytes of it", arguments: [true, false])
    func postHandshakeLinkingIsHidden(asMap: Bool) throws {
        let secret = (0..<32).map { UInt8(0xA0 &+ $0) }
        let linking: CBORValue = [
            1: .bytes([UInt8](repeating: 1, count: 16)), 2: .bytes([UInt8](repeating: 2, count: 16)), 3: .bytes(secret),
            4: .bytes([UInt8](repeating: 4, count: 65)), 5: "Pixel", 6: .bytes([UInt8](repeating: 6, count: 32)),
        ]
        let getInfo = CBOR.encode(SoftwareAuthenticator.getInfo.cbor)
        let postHandshake = CBOR.encode([1: .bytes(getInfo), 2: asMap ? linking : .bytes(CBOR.encode(linking)), 3: ["cable"]])
        let desktopKey = P256.KeyAgreement.PrivateKey().publicKey.x963Representation
        let phoneKey = P256.KeyAgreement.PrivateKey().publicKey.x963Representation
        let keys = SessionKeys(
            initiatorEphemeral: Array(desktopKey), handshakeHash: [UInt8](repeating: 9, count: 32),
            initiatorToResponder: [UInt8](repeating: 7, count: 32), responderToInitiator: [UInt8](repeating: 8, count: 32))
        var phone = Crypter(readKey: keys.initiatorToResponder, writeKey: keys.responderToInitiator)
        let recording = TunnelRecording(
            startMilliseconds: 0, flow: .qr, tunnelID: [UInt8](repeating: 3, count: 16), routingID: [1, 2, 3],
            entries: [
                .init(nanoseconds: 1, event: .message(.joinerToCreator, Array(desktopKey) + [UInt8](repeating: 0, count: 16))),
                .init(nanoseconds: 2, event: .message(.creatorToJoiner, Array(phoneKey) + [UInt8](repeating: 0, count: 16))),
                .init(nanoseconds: 3, event: .message(.creatorToJoiner, try phone.encrypt(postHandshake))),
            ])
        let inspection = Inspector.inspect(recording, keyLog: [keys])
        let message = try #require(inspection.messages.last)
        #expect(message.title == "post-handshake message")
        #expect(message.payload == nil)
        let text = SequenceDiagram.text(inspection) + message.details.joined(separator: "\n")
        let json = String(decoding: try JSONEncoder().encode(inspection), as: UTF8.self)
        for start in 0...(secret.count - 8) {
            let piece = Hex.encode(Array(secret[start..<(start + 8)]))
            #expect(!text.contains(piece) && !json.contains(piece), "8 bytes of the secret from \(start) are shown")
        }
        if asMap {
            #expect(message.details.contains("  3 (linkSecret): 32 secret bytes (not shown)"), "\(message.details)")
            #expect(message.details.contains("  5 (name): \"Pixel\""), "\(message.details)")
        } else {
            #expect(message.details.contains { $0.hasPrefix("2 (linking): ") && $0.hasSuffix("bytes, not a linking map (not shown)") })
        }
    }
}
