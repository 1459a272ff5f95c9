import CTAP2
import Crypto
import HybridCore
import HybridTestSupport
import Testing

/// `QRPayload` against `Vectors/qr.json` (real Chrome and Safari codes, Chromium `KnownQRs`, invalid
/// URLs) and the `qr::Parse` rules of PROTOCOL.md §1.
@Suite struct QRPayloadTests {
    typealias Vector = QRVector

    static func vectors() throws -> [Vector] { try QRVector.load() }

    /// The real Chrome code (a full 6-key map) as a starting point for hand-made variants.
    static func chromeMap() throws -> [CBORValue: CBORValue] {
        let chrome = try #require(try vectors().first { $0.name.hasPrefix("chrome") })
        let cbor = try #require(chrome.cbor)
        return try #require(try CBOR.decode(hex(cbor)).mapValue)
    }

    static func url(_ map: [CBORValue: CBORValue]) -> String {
        "FIDO:/" + Digits.encode(CBOR.encode(.map(map)))
    }

    // MARK: - Known answers

    @Test("valid codes parse to the listed fields", arguments: try vectors().filter { $0.expectError == nil })
    func parsesFields(_ vector: Vector) throws {
        let payload = try QRPayload(url: vector.url)
        #expect(payload.compressedPublicKey == hex(try #require(vector.publicKey)))
        #expect(payload.secret == hex(try #require(vector.secret)))
        #expect(payload.knownDomainCount == vector.knownDomains)
        #expect(payload.timestamp == vector.timestamp)
        #expect(payload.supportsLinking == vector.supportsLinking)
        #expect(payload.requestType.rawValue == vector.requestType)
        if let uncompressed = vector.publicKeyUncompressed {
            #expect(Array(try payload.publicKey.x963Representation) == hex(uncompressed))
        }
        // The CBOR route gives the same answer as the URL route.
        let cbor = hex(try #require(vector.cbor))
        #expect(try QRPayload(cbor: CBOR.decode(cbor)) == payload)
    }

    @Test("every vector's URL carries exactly its CBOR", arguments: try vectors().filter { $0.cbor != nil })
    func urlCarriesCBOR(_ vector: Vector) throws {
        #expect(vector.url.hasPrefix("FIDO:/"))
        #expect(try Digits.decode(vector.url.dropFirst(6)) == hex(try #require(vector.cbor)))
    }

    @Test("real codes re-encode to the identical URL and CBOR", arguments: try vectors().filter { $0.reencodesIdentically == true })
    func reencodesIdentically(_ vector: Vector) throws {
        let payload = try QRPayload(url: vector.url)
        #expect(payload.url == vector.url)
        #expect(CBOR.encode(payload.cbor) == hex(try #require(vector.cbor)))
        // Built from the fields alone, too.
        let publicKey = try #require(vector.publicKey)
        let secret = try #require(vector.secret)
        let requestType = try #require(vector.requestType)
        let rebuilt = QRPayload(
            compressedPublicKey: hex(publicKey), secret: hex(secret),
            knownDomainCount: try #require(vector.knownDomains), timestamp: vector.timestamp,
            supportsLinking: vector.supportsLinking,
            requestType: try #require(QRPayload.RequestType(rawValue: requestType)))
        #expect(rebuilt.url == vector.url)
    }

    @Test("invalid codes are rejected with the listed code", arguments: try vectors().filter { $0.expectError != nil })
    func rejects(_ vector: Vector) throws {
        let expected = try expectedError(vector.expectError)
        #expect(throws: expected) { try QRPayload(url: vector.url) }
    }

    @Test("the vector file covers the real codes, Chromium KnownQRs and invalid URLs")
    func vectorFileShape() throws {
        let all = try Self.vectors()
        #expect(all.filter { $0.reencodesIdentically == true }.count == 2)
        #expect(all.filter { $0.name.hasPrefix("chromium KnownQRs") }.count == 13)
        #expect(all.filter { $0.expectError == "invalidDigits" }.count == 6)
        // PROTOCOL.md §1: a non-canonical map, a secret of 15 or 17 bytes, key 0 or 1 missing, a
        // Unicode look-alike prefix and characters after the digits each have a published case.
        for rule in ["non-canonical map", "secret of 15", "secret of 17", "key 0 missing", "key 1 missing", "dotless i", "trailing"] {
            #expect(all.contains { $0.name.contains(rule) && $0.expectError != nil }, "\(rule)")
        }
    }

    // MARK: - Prefix

    @Test(arguments: ["fido:/", "Fido:/", "fIdO:/", "FIDO:/"])
    func prefixIsCaseInsensitive(_ prefix: String) throws {
        let chrome = try #require(try Self.vectors().first { $0.name.hasPrefix("chrome") })
        let original = try QRPayload(url: chrome.url)
        #expect(try QRPayload(url: prefix + chrome.url.dropFirst(6)) == original)
    }

    /// Chromium compares the prefix ASCII-case-insensitively; Unicode case mappings that happen to
    /// produce ASCII letters (dotless ı → I, fullwidth letters) must not match.
    @Test(arguments: ["f\u{131}do:/", "F\u{130}DO:/", "ＦＩＤＯ:/", "FIDO:", "FIDO/", "FIDO:\\", " FIDO:/", "FIDO:/ ", "FIDO:/\u{301}"])
    func otherPrefixesAreRejected(_ prefix: String) throws {
        let chrome = try #require(try Self.vectors().first { $0.name.hasPrefix("chrome") })
        let thrown = #expect(throws: HybridError.self) { try QRPayload(url: prefix + chrome.url.dropFirst(6)) }
        #expect(thrown?.code == .invalidQRCode || thrown?.code == .invalidDigits)
    }

    // MARK: - Key rules

    @Test("key 6 is ignored whether it is a bool or an array", arguments: [CBORValue.bool(true), .bool(false), .array([0, 1]), .array([])])
    func key6Tolerated(_ key6: CBORValue) throws {
        var map = try Self.chromeMap()
        let original = try QRPayload(cbor: .map(map))
        map[6] = key6
        #expect(try QRPayload(url: Self.url(map)) == original)
        // Key 6 is never emitted.
        #expect(original.cbor.mapValue?[6] == nil)
    }

    @Test func unknownKeysIgnored() throws {
        var map = try Self.chromeMap()
        let original = try QRPayload(cbor: .map(map))
        map[1000] = 42
        map[7] = "x"
        map[-1] = .bytes([1, 2, 3])
        map["text key"] = .null
        #expect(try QRPayload(url: Self.url(map)) == original)
    }

    @Test(arguments: ["xx", "", "GA", "dcp", "mcx", "m"])
    func unknownHintMeansGetAssertion(_ hint: String) throws {
        var map = try Self.chromeMap()
        map[5] = .text(hint)
        #expect(try QRPayload(url: Self.url(map)).requestType == .getAssertion)
    }

    @Test func missingOptionalKeysTakeDefaults() throws {
        var map = try Self.chromeMap()
        for key: CBORValue in [2, 3, 4, 5] { map[key] = nil }
        let payload = try QRPayload(url: Self.url(map))
        #expect(payload.knownDomainCount == 0)
        #expect(payload.timestamp == nil)
        #expect(payload.supportsLinking == nil)
        #expect(payload.requestType == .getAssertion)
    }

    /// Chromium never reads key 3, so a timestamp of another type does not reject the code.
    @Test func key3OfAnotherTypeIgnored() throws {
        var map = try Self.chromeMap()
        map[3] = "yesterday"
        let payload = try QRPayload(url: Self.url(map))
        #expect(payload.timestamp == nil)
        #expect(payload.secret == hex("871bcec9c1227f91ccb86c9ffacd9eac"))
    }

    @Test("key 0 of 32 or 34 bytes, uncompressed, missing or text is rejected", arguments: [32, 34, 65, 0, -1, -2])
    func key0Rejected(_ variant: Int) throws {
        var map = try Self.chromeMap()
        let key = try #require(map[0]?.bytesValue)
        switch variant {
        case 32: map[0] = .bytes(Array(key.prefix(32)))
        case 34: map[0] = .bytes(key + [0])
        case 65: map[0] = .bytes(hex("04dd39afaf50b1b5b05ac1dad0b2848a00c0f6ec4e65a25687ca4f3c71dae50bea3d9565cd77a0683fb991008566b214f6f5217bb660b57aeff02df5df60dfa22b"))
        case 0: map[0] = nil
        case -1: map[0] = .text("03dd39")
        default: map[0] = .bytes([0x04] + key.dropFirst())  // 33 bytes with a non-compressed tag
        }
        #expect(throws: HybridError(.invalidQRCode)) { try QRPayload(url: Self.url(map)) }
    }

    @Test("key 1 other than a 16-byte string is rejected", arguments: [0, 15, 17, 32, -1, -2])
    func key1Rejected(_ variant: Int) throws {
        var map = try Self.chromeMap()
        switch variant {
        case -1: map[1] = nil
        case -2: map[1] = .text("0123456789abcdef")
        default: map[1] = .bytes([UInt8](repeating: 7, count: variant))
        }
        #expect(throws: HybridError(.invalidQRCode)) { try QRPayload(url: Self.url(map)) }
    }

    @Test("keys 2, 4 and 5 of the wrong type are rejected", arguments: [
        (CBORValue(2), CBORValue.text("2")), (2, .bool(true)), (2, .bytes([2])),
        (4, .int(1)), (4, .text("true")), (4, .null),
        (5, .int(1)), (5, .bytes(Array("ga".utf8))), (5, .array(["ga"])),
    ])
    func wrongTypesRejected(_ key: CBORValue, _ value: CBORValue) throws {
        var map = try Self.chromeMap()
        map[key] = value
        #expect(throws: HybridError(.invalidQRCode)) { try QRPayload(url: Self.url(map)) }
    }

    @Test("a payload that is not one canonical CBOR map is rejected")
    func notACanonicalMap() throws {
        let chrome = hex("a600582103dd39afaf50b1b5b05ac1dad0b2848a00c0f6ec4e65a25687ca4f3c71dae50bea0150871bcec9c1227f91ccb86c9ffacd9eac0202031a6356217b04f505626d63")
        let cases: [[UInt8]] = [
            CBOR.encode([1, 2]),  // an array
            CBOR.encode(.bytes(chrome)),  // the map wrapped in a byte string
            chrome + [0x00],  // trailing byte
            Array(chrome.dropLast()),  // truncated
            [0xa0],  // empty map
        ]
        for bytes in cases {
            #expect(throws: HybridError(.invalidQRCode)) { try QRPayload(url: "FIDO:/" + Digits.encode(bytes)) }
        }
        // Keys out of canonical order (5 before 4).
        var reordered = chrome
        let tail = Array(reordered.suffix(6))  // 04 f5 05 62 6d 63
        #expect(tail == [0x04, 0xf5, 0x05, 0x62, 0x6d, 0x63])
        reordered.replaceSubrange(reordered.count - 6..<reordered.count, with: [0x05, 0x62, 0x6d, 0x63, 0x04, 0xf5])
        #expect(throws: HybridError(.invalidQRCode)) { try QRPayload(url: "FIDO:/" + Digits.encode(reordered)) }
    }

    @Test("digit groups read big-endian, or text keys, are named as the likely mistake")
    func implementerMistakesNamed() throws {
        let chrome = hex("a600582103dd39afaf50b1b5b05ac1dad0b2848a00c0f6ec4e65a25687ca4f3c71dae50bea0150871bcec9c1227f91ccb86c9ffacd9eac0202031a6356217b04f505626d63")
        // A desktop that writes each 7-byte group as a big-endian number: the reader's bytes are
        // every group reversed.
        var swapped: [UInt8] = []
        for start in stride(from: 0, to: chrome.count, by: 7) {
            swapped += chrome[start..<min(start + 7, chrome.count)].reversed()
        }
        do {
            _ = try QRPayload(url: "FIDO:/" + Digits.encode(swapped))
            Issue.record("big-endian groups parsed")
        } catch {
            #expect(error.code == .invalidQRCode)
            #expect(error.reason.hasSuffix("is each 17-digit group a 7-byte little-endian number?"), "\(error.reason)")
        }
        // A map that is not canonical is not given that hint: its first byte is a map's.
        do {
            _ = try QRPayload(url: "FIDO:/" + Digits.encode(chrome + [0x00]))
            Issue.record("a trailing byte parsed")
        } catch {
            #expect(!error.reason.contains("little-endian"), "\(error.reason)")
        }
        let textKeys: [CBORValue: CBORValue] = ["0": .bytes(Array(chrome[4..<37])), "1": .bytes([UInt8](repeating: 1, count: 16))]
        do {
            _ = try QRPayload(url: Self.url(textKeys))
            Issue.record("text keys parsed")
        } catch {
            #expect(error.reason == "key 0 (public key) missing or not a byte string (the map's keys are text strings; the QR code's keys are integers 0-5)")
        }
    }

    /// A payload built in code is not validated until its key is used.
    @Test func publicKeyOfAnInvalidPayload() {
        for key in [[UInt8](), [0x02], [0x04] + [UInt8](repeating: 1, count: 32), [0x03] + [UInt8](repeating: 0xFF, count: 32)] {
            let payload = QRPayload(compressedPublicKey: key, secret: [UInt8](repeating: 0, count: 16))
            #expect(throws: HybridError(.invalidPublicKey)) { try payload.publicKey }
        }
    }

    /// Parsing keeps the point it decompressed (so `publicKey` does not decompress again); the kept
    /// point is not part of the value, and replacing the key bytes drops it.
    @Test func parsedKeyFollowsTheKeyBytes() throws {
        let random = RandomSource.deterministic(seed: Array("parsedKey".utf8))
        let first = random.keyAgreementKey().publicKey, second = random.keyAgreementKey().publicKey
        let built = QRPayload(compressedPublicKey: Array(first.compressedRepresentation), secret: random.bytes(16))
        var parsed = try QRPayload(url: built.url)
        #expect(parsed == built && Set([parsed, built]).count == 1)
        #expect(Array(try parsed.publicKey.x963Representation) == Array(first.x963Representation))

        parsed.compressedPublicKey = Array(second.compressedRepresentation)
        #expect(Array(try parsed.publicKey.x963Representation) == Array(second.x963Representation))
        parsed.compressedPublicKey = [0x02]
        #expect(throws: HybridError(.invalidPublicKey)) { try parsed.publicKey }
    }

    @Test("defaults of a payload built in code: two known domains, no timestamp, ga")
    func builtDefaults() {
        let payload = QRPayload(compressedPublicKey: [0x02] + [UInt8](repeating: 1, count: 32), secret: [UInt8](repeating: 0, count: 16))
        #expect(payload.knownDomainCount == 2)
        #expect(payload.cbor.mapValue?.keys.sorted { $0.description < $1.description } == [0, 1, 2, 5])
        #expect(payload.cbor.mapValue?[5] == "ga")
    }

    // MARK: - Round trip

    @Test("random payloads survive url → parse")
    func roundTrip() throws {
        let random = RandomSource.deterministic(seed: Array("QRPayloadTests".utf8))
        for index in 0..<40 {
            let key = random.keyAgreementKey()
            let bytes = random.bytes(4)
            let payload = QRPayload(
                compressedPublicKey: Array(key.publicKey.compressedRepresentation),
                secret: random.bytes(16),
                knownDomainCount: UInt64(bytes[0]) << UInt64(bytes[1] % 57),
                timestamp: bytes[2] & 1 == 0 ? nil : UInt64(bytes[3]) << 24,
                supportsLinking: [nil, true, false][Int(bytes[2] >> 1) % 3],
                requestType: bytes[3] & 1 == 0 ? .getAssertion : .makeCredential)
            let parsed = try QRPayload(url: payload.url)
            #expect(parsed == payload, "payload \(index)")
            #expect(Array(try parsed.publicKey.x963Representation) == Array(key.publicKey.x963Representation))
        }
    }
}

extension QRVector: CustomTestStringConvertible {
    public var testDescription: String { name }
}
