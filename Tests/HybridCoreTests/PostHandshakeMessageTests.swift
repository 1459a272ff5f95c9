import CTAP2
import HybridCore
import HybridTestSupport
import Testing

/// `PostHandshakeMessage` against the Android and iOS captures in `Vectors/framing.json`, the QR
/// transcript, and each rule of Chromium's `kWaitingForPostHandshakeMessage` (PROTOCOL.md §7.1).
@Suite struct PostHandshakeMessageTests {
    struct Capture: Decodable, Sendable, CustomTestStringConvertible {
        let name: String
        let plaintext: String
        let features: [String]?
        var testDescription: String { name }
    }
    struct File: Decodable { let postHandshake: [Capture] }

    static func captures() throws -> [Capture] { try Vectors.load("framing", as: File.self).postHandshake }

    static let getInfo = CBOR.encode([1: ["FIDO_2_0", "FIDO_2_1"], 3: .bytes([UInt8](repeating: 0, count: 16))])

    static func parse(_ map: [CBORValue: CBORValue]) throws(HybridError) -> PostHandshakeMessage {
        try PostHandshakeMessage.parse(CBOR.encode(.map(map)))
    }

    // MARK: - Known answers

    @Test("captured phone messages parse; absent features mean [\"ctap\"]", arguments: try captures())
    func parsesCaptures(_ capture: Capture) throws {
        let message = try PostHandshakeMessage.parse(hex(capture.plaintext))
        #expect(message.features == capture.features)
        #expect(message.features == nil)
        #expect(message.effectiveFeatures == ["ctap"])
        #expect(message.linking == nil)
        // Key 1 is the getInfo CBOR itself, and it is a getInfo map (versions in key 1).
        let map = try #require(try CBOR.decode(hex(capture.plaintext)).mapValue)
        #expect(message.getInfo == map[1]?.bytesValue)
        let getInfoBytes = try #require(message.getInfo)
        let getInfo = try #require(try CBOR.decode(getInfoBytes).mapValue)
        #expect(getInfo[1]?.arrayValue?.contains("FIDO_2_0") == true)
    }

    @Test func capturesAreAndroidAndIOS() throws {
        #expect(try Self.captures().map(\.name) == ["posthandshake_android_chrome", "posthandshake_ios16"])
    }

    @Test("transcript_qr_flow: {1: getInfo, 3: [\"ctap\"]} parses and re-encodes byte for byte")
    func transcript() throws {
        let t = try TranscriptQRInputs.load()
        let plaintext = t.post_handshake.messages[0].plaintext
        let message = try PostHandshakeMessage.parse(hex(plaintext))
        #expect(message.getInfo.map { Hex.encode($0) } == t.post_handshake.getinfo_cbor)
        #expect(message.features == ["ctap"])
        #expect(Hex.encode(PostHandshakeMessage(getInfo: hex(t.post_handshake.getinfo_cbor)).encode()) == plaintext)
    }

    @Test("encode → parse round trips", arguments: [nil, ["ctap"], ["dc", "ctap"], ["ctap", "dc", "future"]] as [[String]?])
    func roundTrip(_ features: [String]?) throws {
        for linking in [nil, CBORValue.map([1: .bytes([1]), 5: "phone"])] {
            let message = PostHandshakeMessage(getInfo: Self.getInfo, linking: linking, features: features)
            let parsed = try PostHandshakeMessage.parse(message.encode())
            #expect(parsed.getInfo == Self.getInfo)
            #expect(parsed.linking == linking)
            #expect(parsed.features == features?.sorted())
        }
    }

    @Test("features are written sorted, as Chromium does")
    func featuresSorted() throws {
        let encoded = PostHandshakeMessage(getInfo: [0xa0], features: ["dc", "ctap"]).encode()
        #expect(try CBOR.decode(encoded).mapValue?[3] == ["ctap", "dc"])
    }

    @Test("non-string feature entries are ignored")
    func nonStringFeaturesIgnored() throws {
        let message = try Self.parse([1: .bytes(Self.getInfo), 3: [1, "ctap", .bytes([0]), ["dc"]]])
        #expect(message.features == ["ctap"])
    }

    // MARK: - Chromium's rules as negative tests

    @Test("key 3 that is not an array is rejected", arguments: [CBORValue.text("ctap"), .int(1), .map(["ctap": true]), .bytes(Array("ctap".utf8)), .null])
    func key3NotArray(_ key3: CBORValue) {
        #expect(throws: HybridError(.invalidPostHandshakeMessage)) { try Self.parse([1: .bytes(Self.getInfo), 3: key3]) }
    }

    @Test("CTAP not advertised is rejected", arguments: [[], ["dc"], ["CTAP"], ["ctap2"], [" ctap"]] as [[CBORValue]])
    func ctapNotAdvertised(_ features: [CBORValue]) {
        #expect(throws: HybridError(.invalidPostHandshakeMessage)) { try Self.parse([1: .bytes(Self.getInfo), 3: .array(features)]) }
    }

    @Test("key 1 missing or not a byte string is rejected", arguments: [nil, CBORValue.text("getInfo"), .map([1: 1]), .int(4), .array([.bytes([0xa0])])])
    func key1(_ key1: CBORValue?) {
        var map: [CBORValue: CBORValue] = [3: ["ctap"]]
        map[1] = key1
        #expect(throws: HybridError(.invalidPostHandshakeMessage)) { try Self.parse(map) }
        map[3] = nil  // features absent: CTAP assumed, same rule
        #expect(throws: HybridError(.invalidPostHandshakeMessage)) { try Self.parse(map) }
    }

    /// Chromium's desktop answers getInfo from this value and reads it with `ReadCTAPGetInfoResponse`:
    /// what that refuses ends its ceremony, so the desktop refuses it here, saying what is wrong.
    @Test(
        "a getInfo the desktop could not use is rejected naming the problem",
        arguments: [
            ([0xFF, 0x00] + Array("garbage".utf8), "not an authenticatorGetInfo response"),
            (CBOR.encode([3: .bytes([UInt8](repeating: 0, count: 16))]), "versions"),
            (CBOR.encode([1: ["FIDO_2_0"], 3: .bytes([1, 2])]), "aaguid"),
            (CBOR.encode([1: ["FIDO_2_0"], 3: .bytes([UInt8](repeating: 0, count: 16)), 4: ["rk": 1]]), "rk"),
            (CBOR.encode([1: ["FIDO_2_0", "FIDO_2_0"], 3: .bytes([UInt8](repeating: 0, count: 16))]), "version \"FIDO_2_0\" is listed twice"),
            (CBOR.encode([1: ["U2F_V2"], 3: .bytes([UInt8](repeating: 0, count: 16))]), "versions [\"U2F_V2\"] name no CTAP2 version"),
            (CBOR.encode([1: [], 3: .bytes([UInt8](repeating: 0, count: 16))]), "versions [] name no CTAP2 version"),
            (CBOR.encode([1: ["FIDO_2_3"], 3: .bytes([UInt8](repeating: 0, count: 16))]), "name no CTAP2 version Chromium knows (FIDO_2_0, FIDO_2_1)"),
            (CBOR.encode([1: ["FIDO_2_1"], 3: .bytes([UInt8](repeating: 0, count: 16)), 4: ["clientPin": false]]), "without 0x06 (pinUvAuthProtocols)"),
            (CBOR.encode([1: ["FIDO_2_1"], 3: .bytes([UInt8](repeating: 0, count: 16)), 4: ["largeBlobs": true]]), "largeBlobs is offered without rk"),
            (CBOR.encode([1: ["FIDO_2_1"], 3: .bytes([UInt8](repeating: 0, count: 16)), 4: ["defaultCredProtect": 1]]), "expected 2 or 3"),
            (CBOR.encode([1: ["FIDO_2_1"], 3: .bytes([UInt8](repeating: 0, count: 16)), 4: ["defaultCredProtect": true]]), "expected 2 or 3"),
            (CBOR.encode([1: ["FIDO_2_1"], 3: .bytes([UInt8](repeating: 0, count: 16)), 0x0A: [["alg": -7]]]), "type"),
            (CBOR.encode([1: ["FIDO_2_1"], 3: .bytes([UInt8](repeating: 0, count: 16)), 0x09: 5]), "transports"),
            (CBOR.encode([1: ["FIDO_2_2"], 3: .bytes([UInt8](repeating: 0, count: 16))]), "name no CTAP2 version Chromium knows"),
            (CBOR.encode([1: ["FIDO_2_1"], 3: .bytes([UInt8](repeating: 0, count: 16)), 4: ["makeCredUvNotRqd": 1]]), "makeCredUvNotRqd"),
            // Chromium's extension rules: credBlob needs credProtect and 0x0F (at least 32), 0x0F needs credBlob,
            // large blobs one way only; 0x0B-0x0D of their types.
            (CBOR.encode([1: ["FIDO_2_1"], 2: ["credBlob"], 3: .bytes([UInt8](repeating: 0, count: 16)), 0x0F: 32]),
             "the credBlob extension is offered without credProtect"),
            (CBOR.encode([1: ["FIDO_2_1"], 2: ["credBlob", "credProtect"], 3: .bytes([UInt8](repeating: 0, count: 16))]),
             "the credBlob extension is offered without 0x0F (maxCredBlobLength)"),
            (CBOR.encode([1: ["FIDO_2_1"], 2: ["credBlob", "credProtect"], 3: .bytes([UInt8](repeating: 0, count: 16)), 0x0F: 31]),
             "0x0F (maxCredBlobLength) is 31; CTAP 2.1 asks for at least 32"),
            (CBOR.encode([1: ["FIDO_2_1"], 2: ["credBlob", "credProtect"], 3: .bytes([UInt8](repeating: 0, count: 16)), 0x0F: "32"]),
             "0x0F (maxCredBlobLength): expected an unsigned integer"),
            (CBOR.encode([1: ["FIDO_2_1"], 3: .bytes([UInt8](repeating: 0, count: 16)), 0x0F: 32]),
             "0x0F (maxCredBlobLength) is 32 without the credBlob extension"),
            (CBOR.encode([1: ["FIDO_2_1"], 2: ["largeBlob", "largeBlobKey"], 3: .bytes([UInt8](repeating: 0, count: 16)),
                          4: ["rk": true, "largeBlobs": true]]),
             "large blobs are offered both ways"),
            (CBOR.encode([1: ["FIDO_2_1"], 3: .bytes([UInt8](repeating: 0, count: 16)), 0x0B: -1]), "0x0B (maxSerializedLargeBlobArray): expected an unsigned integer"),
            (CBOR.encode([1: ["FIDO_2_1"], 3: .bytes([UInt8](repeating: 0, count: 16)), 0x0C: 0]), "0x0C (forcePINChange): expected a boolean"),
            (CBOR.encode([1: ["FIDO_2_1"], 3: .bytes([UInt8](repeating: 0, count: 16)), 0x0D: true]), "0x0D (minPINLength): expected an unsigned integer"),
            // Not canonical: aaguid (3) before versions (1).
            ([0xA2, 0x03, 0x50] + [UInt8](repeating: 0, count: 16) + [0x01, 0x81, 0x68] + Array("FIDO_2_0".utf8), "canonical"),
        ] as [([UInt8], String)])
    func unusableGetInfo(getInfo: [UInt8], mention: String) {
        #expect {
            try Self.parse([1: .bytes(getInfo), 3: ["ctap"]])
        } throws: { error in
            (error as? HybridError)?.code == .invalidPostHandshakeMessage && "\(error)".contains("key 1 (getInfo)")
                && "\(error)".contains(mention)
        }
    }

    @Test("a getInfo with unknown versions, options, algorithm types and members beside a known FIDO_2_x is accepted, as Chromium skips them")
    func getInfoUnknownsAccepted() throws {
        let getInfo = CBOR.encode([
            1: ["FIDO_2_3", "U2F_V2", "FIDO_2_1"], 3: .bytes([UInt8](repeating: 7, count: 16)), 0x11: 3, 0x20: "future",
            // The extension rules met: credBlob with credProtect and 0x0F; large blobs by the extension only.
            2: ["credBlob", "credProtect", "largeBlob", "largeBlobKey", "future-ext"], 0x0F: 32,
            0x0B: 1024, 0x0C: false, 0x0D: 4,
            // Options Chromium does not read as booleans, or not at all; a non-text key.
            4: .map(["rk": true, "defaultCredProtect": 2, "custom": 5, 7: true, "largeBlobs": false]),
            // Algorithms of another type (no alg needed), and one beyond 32 bits: skipped.
            0x0A: [["type": "x"], ["type": "public-key", "alg": -7], ["type": "public-key", "alg": .int(1 << 40)]],
            // Members Chromium never reads, malformed.
            0x0E: "1.2", 0x16: [1],
        ])
        #expect(try Self.parse([1: .bytes(getInfo)]).getInfo == getInfo)
        let info = try AuthenticatorGetInfoResponse(cbor: CBOR.decode(getInfo), reading: .chromium)
        #expect(info.options == ["rk": true, "largeBlobs": false])
        // The strict reading, for checking an authenticator, refuses the same document.
        #expect(throws: CTAP2Error.self) { try AuthenticatorGetInfoResponse(cbor: CBOR.decode(getInfo)) }
        #expect(info.algorithms == [PublicKeyCredentialParameters(alg: .es256)])
        #expect(info.firmwareVersion == nil && info.attestationFormats == nil)
    }

    @Test("key 2 that is not a map is rejected", arguments: [CBORValue.bytes([0xa0]), .int(0), .array([]), .text("link"), .bool(false), .null])
    func key2NotMap(_ key2: CBORValue) {
        #expect(throws: HybridError(.invalidPostHandshakeMessage)) { try Self.parse([1: .bytes(Self.getInfo), 2: key2]) }
    }

    @Test("key 2 that is a map is kept for verification")
    func key2Map() throws {
        let message = try Self.parse([1: .bytes(Self.getInfo), 2: [1: "x"]])
        #expect(message.linking == [1: "x"])
    }

    @Test("a message that is not a CBOR map is rejected", arguments: [
        CBOR.encode([1, 2]), CBOR.encode(.bytes([0xa0])), CBOR.encode(1), CBOR.encode("ctap"), CBOR.encode(.null),
    ])
    func notAMap(_ plaintext: [UInt8]) {
        #expect(throws: HybridError(.invalidPostHandshakeMessage)) { try PostHandshakeMessage.parse(plaintext) }
    }

    /// Revision-0 phones padded the map; a strict CBOR read sees trailing bytes.
    @Test("trailing garbage, truncation and empty input are rejected")
    func trailingGarbage() throws {
        let valid = PostHandshakeMessage(getInfo: Self.getInfo).encode()
        _ = try PostHandshakeMessage.parse(valid)
        for suffix: [UInt8] in [[0], [0, 0], [0xFF], [0x00, 0x02]] {
            #expect(throws: HybridError(.invalidPostHandshakeMessage)) { try PostHandshakeMessage.parse(valid + suffix) }
        }
        #expect(throws: HybridError(.invalidPostHandshakeMessage)) { try PostHandshakeMessage.parse(Array(valid.dropLast())) }
        #expect(throws: HybridError(.invalidPostHandshakeMessage)) { try PostHandshakeMessage.parse([]) }
        // A revision-0 style message: the map followed by zeros and a uint16 count, 512 bytes in all.
        let map = CBOR.encode([1: .bytes(Self.getInfo)])
        let zeros = 512 - map.count - 2
        let revision0 = map + [UInt8](repeating: 0, count: zeros) + [UInt8(zeros & 0xFF), UInt8(zeros >> 8)]
        #expect(throws: HybridError(.invalidPostHandshakeMessage)) { try PostHandshakeMessage.parse(revision0) }
    }

    @Test("the usual mistakes are named: a type byte before the map, bytes left after it by a short padding count")
    func mistakesNamed() {
        let valid = PostHandshakeMessage(getInfo: Self.getInfo).encode()
        for (plaintext, reason) in [
            ([0x01] + valid, "a type byte (0x01) comes before its CBOR map: the post-handshake message alone has none"),
            (valid + [0], "its CBOR map is followed by 1 more byte(s): a padding count too small by that much leaves them "
                + "(or a revision-0 phone, which pads this map itself: not supported)"),
        ] {
            #expect {
                try PostHandshakeMessage.parse(plaintext)
            } throws: { error in
                (error as? HybridError)?.code == .invalidPostHandshakeMessage && (error as? HybridError)?.reason == reason
            }
        }
        #expect {
            try PostHandshakeMessage.parse(Array(valid.dropLast()))
        } throws: { error in
            (error as? HybridError)?.reason.hasPrefix("its CBOR map is cut short (CBOR: input ends inside an item at offset ") == true
                && (error as? HybridError)?.reason.hasSuffix("a padding count too large would do this") == true
        }
    }
}
