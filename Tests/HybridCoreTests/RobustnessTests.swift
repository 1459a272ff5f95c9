import CTAP2
import Crypto
import HybridCore
import HybridTestSupport
import Testing

/// Bounded, deterministic robustness tests of every HybridCore parser: mutations of valid inputs
/// (bit flips, byte changes, truncation, insertion, deletion, duplication, splicing — `Mutator`),
/// structure-aware CBOR mutations (`CBORValueMutator`) and random bytes. Each input must be accepted
/// or rejected with the parser's own error codes; accepted inputs must satisfy the parser's
/// invariants (usually: re-encoding gives the input back). A trap fails the run; every loop is
/// bounded, so a hang would show up as the suite's time limit.
///
/// Seeds are fixed, so a failure reproduces exactly. Input counts are in ``Budget``.
@Suite(.timeLimit(.minutes(2))) struct RobustnessTests {
    /// Inputs per parser (107,000 in all). Cheap parsers get many; the QR payload (a point
    /// decompression per input) and the handshake (HKDF and ECDH) few, so the suite stays at a few
    /// seconds in a debug build.
    enum Budget {
        static let digits = 12_000
        static let qrPayload = 3_000
        static let eid = 12_000
        static let advert = 6_000
        static let initiatorFinish = 2_000
        static let respondQR = 1_000
        static let crypterDecrypt = 5_000
        static let unpad = 25_000
        static let frame = 25_000
        static let postHandshake = 7_000
        static let update = 5_000
        static let linkingInfo = 4_000
    }

    /// Outcome counts and rule violations, collected without an `#expect` per input.
    struct Outcomes {
        let parser: String
        let allowed: Set<HybridError.Code>
        var accepted = 0
        var rejected = 0
        var violations: [String] = []

        init(_ parser: String, allowed: Set<HybridError.Code>) {
            self.parser = parser
            self.allowed = allowed
        }

        mutating func accepted(_ invariantHolds: Bool, _ input: @autoclosure () -> [UInt8]) {
            accepted += 1
            if !invariantHolds { violations.append("accepted input breaks an invariant: \(Hex.encode(input()))") }
        }

        mutating func rejected(_ error: HybridError, _ input: @autoclosure () -> [UInt8]) {
            rejected += 1
            if !allowed.contains(error.code) { violations.append("\(error) for \(Hex.encode(input()))") }
        }

        func check(total: Int, expectAccepted: Bool = true, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(violations.isEmpty, "\(parser): \(violations.count) violations, first: \(violations.prefix(3))", sourceLocation: sourceLocation)
            #expect(accepted + rejected == total, "\(parser): ran \(accepted + rejected) of \(total)", sourceLocation: sourceLocation)
            #expect(rejected > 0, "\(parser): nothing was rejected", sourceLocation: sourceLocation)
            if expectAccepted {
                #expect(accepted > 0, "\(parser): nothing was accepted", sourceLocation: sourceLocation)
            }
        }
    }

    // MARK: - QR

    @Test func digitsDecode() throws {
        let corpus = try Vectors.load("digits", as: VectorFile<DigitsTests.Vector>.self).vectors
            .filter { $0.expectError == nil }.map { Array($0.digits.utf8) }
        var mutator = Mutator(seed: 0xD161_7501, corpus: corpus, maxRandomLength: 48)
        var outcomes = Outcomes("Digits.decode", allowed: [.invalidDigits])
        for index in 0..<Budget.digits {
            var input = mutator.next()
            // Half the inputs are digit-only, so decoding reaches the length and range rules.
            if index.isMultiple(of: 2) { input = input.map { UInt8(ascii: "0") + $0 % 10 } }
            let string = String(decoding: input, as: UTF8.self)
            do {
                let bytes = try Digits.decode(string)
                outcomes.accepted(Digits.encode(bytes) == string, input)
            } catch {
                outcomes.rejected(error, input)
            }
        }
        outcomes.check(total: Budget.digits)
    }

    @Test func qrPayloadFromURL() throws {
        let vectors = try QRPayloadTests.vectors()
        let urls = vectors.map { Array($0.url.utf8) } + [Array(try TranscriptQRInputs.load().qr.url.utf8)]
        let maps = vectors.filter { $0.expectError == nil }.compactMap { $0.cbor.map(hex) }
        let values = try maps.map { try CBOR.decode($0) }
        var urlMutator = Mutator(seed: 0x0051_2001, corpus: urls, maxRandomLength: 200)
        var cborMutator = Mutator(seed: 0x0051_2002, corpus: maps, maxRandomLength: 80)
        var valueMutator = CBORValueMutator(seed: 0x0051_2003)
        var outcomes = Outcomes("QRPayload(url:)", allowed: [.invalidQRCode, .invalidDigits])
        for index in 0..<Budget.qrPayload {
            let url: String
            switch index % 3 {
            case 0: url = String(decoding: urlMutator.next(), as: UTF8.self)
            case 1: url = "FIDO:/" + Digits.encode(cborMutator.next())
            default:
                var value = values[index % values.count]
                for _ in 0...(index / 3 % 3) { value = valueMutator.mutate(value) }
                url = "FIDO:/" + Digits.encode(CBOR.encode(value))
            }
            do {
                let payload = try QRPayload(url: url)
                let again = try? QRPayload(url: payload.url)
                outcomes.accepted(
                    again == payload && payload.compressedPublicKey.count == 33 && payload.secret.count == 16,
                    Array(url.utf8))
            } catch {
                outcomes.rejected(error, Array(url.utf8))
            }
        }
        outcomes.check(total: Budget.qrPayload)
    }

    // MARK: - Advert

    @Test func eidFromBytes() throws {
        let corpus = try AdvertAndEIDCorpus.plaintexts()
        var mutator = Mutator(seed: 0x0E1D_0001, corpus: corpus, maxRandomLength: 24)
        var outcomes = Outcomes("EID(bytes:)", allowed: [.invalidAdvert])
        for _ in 0..<Budget.eid {
            let input = mutator.next()
            do {
                let eid = try EID(bytes: input)
                outcomes.accepted(eid.bytes == input && eid.domain.host != nil, input)
            } catch {
                outcomes.rejected(error, input)
            }
        }
        outcomes.check(total: Budget.eid)
    }

    /// Trial decryption never throws: mutated adverts are "not ours"; tag-valid adverts with random
    /// plaintexts are matched (and give the plaintext back) or rejected with `invalidAdvert`.
    @Test func advertDecrypt() throws {
        let keys = QRSecretKeys(qrSecret: hex("01fea6f7c4807493dc256f9eacf756c9"))
        let cipher = AdvertCipher(eidKey: keys.eidKey)
        let advert = hex("027d84ed6076b55e247c830f82955e4d126e7f43")
        var mutator = Mutator(seed: 0xAD7E_0001, corpus: [advert], maxRandomLength: 40)
        var generator = SeededGenerator(seed: 0xAD7E_0002)
        var violations: [String] = []
        var matched = 0, notOurs = 0, rejected = 0
        for index in 0..<Budget.advert {
            if index % 5 == 4 {
                // A tag-valid advert around an arbitrary plaintext (reserved byte often zero).
                var plaintext = generator.bytes(16)
                if index % 10 == 4 { plaintext[0] = 0 }
                switch cipher.decrypt(advert: cipher.encrypt(plaintext: plaintext)) {
                case .matched(let decrypted, let eid):
                    matched += 1
                    if decrypted != plaintext || eid.bytes != plaintext { violations.append("wrong plaintext for \(Hex.encode(plaintext))") }
                case .rejected(let error):
                    rejected += 1
                    if error.code != .invalidAdvert { violations.append("\(error) for \(Hex.encode(plaintext))") }
                    if plaintext[0] == 0 && TunnelDomainID(rawValue: UInt16(plaintext[14]) | UInt16(plaintext[15]) << 8).host != nil {
                        violations.append("valid plaintext rejected: \(Hex.encode(plaintext))")
                    }
                case .notOurs:
                    violations.append("own advert not recognised: \(Hex.encode(plaintext))")
                }
            } else {
                let input = mutator.next()
                let result = cipher.decrypt(advert: input)
                if input == advert {
                    matched += 1
                    if case .matched = result {} else { violations.append("the real advert did not match") }
                } else {
                    notOurs += 1
                    if result != .notOurs { violations.append("mutated advert \(Hex.encode(input)) gave \(result)") }
                }
            }
        }
        #expect(violations.isEmpty, "\(violations.count) violations, first: \(violations.prefix(3))")
        #expect(matched + notOurs + rejected == Budget.advert)
        #expect(matched > 0 && notOurs > 0 && rejected > 0)
    }

    // MARK: - Handshake

    @Test func initiatorFinish() throws {
        let t = try TranscriptQRInputs.load()
        let initiator = NoiseHandshake.Initiator.qr(
            psk: hex(t.advert.psk_32), identityKey: try p256PrivateKey(t.inputs.desktop_identity_private_scalar),
            ephemeralKey: try p256PrivateKey(t.inputs.desktop_ephemeral_private_scalar))
        let response = hex(t.noise.msg2_phone_to_desktop)
        var mutator = Mutator(seed: 0x0001_5E01, corpus: [response, hex(t.noise.msg1_desktop_to_phone)], maxRandomLength: 100)
        var outcomes = Outcomes("Initiator.finish", allowed: [.handshakeFailed])
        for index in 0..<Budget.initiatorFinish {
            // Every hundredth input is the real response, to show acceptance still works mid-run.
            let input = index % 100 == 0 ? response : mutator.next()
            do {
                let result = try initiator.finish(response: input)
                outcomes.accepted(input == response && Hex.encode(result.handshakeHash) == t.noise.handshake_hash, input)
            } catch {
                outcomes.rejected(error, input)
            }
        }
        outcomes.check(total: Budget.initiatorFinish)
    }

    @Test func respondQR() throws {
        let t = try TranscriptQRInputs.load()
        let psk = hex(t.advert.psk_32)
        let peer = try p256PrivateKey(t.inputs.desktop_identity_private_scalar).publicKey
        let ephemeral = try p256PrivateKey(t.inputs.phone_ephemeral_private_scalar)
        let message = hex(t.noise.msg1_desktop_to_phone)
        var mutator = Mutator(seed: 0x0001_5E02, corpus: [message, hex(t.noise.msg2_phone_to_desktop)], maxRandomLength: 100)
        var outcomes = Outcomes("NoiseHandshake.respondQR", allowed: [.handshakeFailed])
        for index in 0..<Budget.respondQR {
            let input = index % 100 == 0 ? message : mutator.next()
            do {
                let (_, response) = try NoiseHandshake.respondQR(to: input, psk: psk, peerIdentity: peer, ephemeralKey: ephemeral)
                outcomes.accepted(input == message && Hex.encode(response) == t.noise.msg2_phone_to_desktop, input)
            } catch {
                outcomes.rejected(error, input)
            }
        }
        outcomes.check(total: Budget.respondQR)
    }

    // MARK: - Transport

    @Test func crypterDecrypt() throws {
        let k1 = [UInt8](repeating: 0x11, count: 32)
        let k2 = [UInt8](repeating: 0x22, count: 32)
        // Several valid sequence-0 messages of different lengths, each under a fresh sender.
        var plaintexts: [[UInt8]: [UInt8]] = [:]
        for length in [0, 1, 31, 32, 90, 200] {
            var sender = Crypter(readKey: k2, writeKey: k1)
            let message = [UInt8](repeating: UInt8(length & 0xFF), count: length)
            plaintexts[try sender.encrypt(message)] = message
        }
        let corpus = plaintexts.keys.sorted { $0.count < $1.count }
        let receiver = Crypter(readKey: k1, writeKey: k2)
        var mutator = Mutator(seed: 0xC2F7_0001, corpus: corpus, maxRandomLength: 96)
        var outcomes = Outcomes("Crypter.decrypt", allowed: [.decryptionFailed])
        for index in 0..<Budget.crypterDecrypt {
            let input = index % 200 == 0 ? corpus[index / 200 % corpus.count] : mutator.next()
            var copy = receiver
            do {
                let plaintext = try copy.decrypt(input)
                outcomes.accepted(plaintexts[input] == plaintext && copy.readSequence == 1, input)
            } catch {
                outcomes.rejected(error, input)
                if copy.readSequence != 0 { outcomes.violations.append("sequence moved on failure") }
            }
        }
        outcomes.check(total: Budget.crypterDecrypt)
    }

    @Test func crypterUnpad() throws {
        let corpus = [0, 1, 5, 31, 32, 33, 64].map { Crypter.pad([UInt8](repeating: 0xEE, count: $0)) } + [hex("aabbccdd00000003")]
        var mutator = Mutator(seed: 0x9AD0_0001, corpus: corpus, maxRandomLength: 40)
        var outcomes = Outcomes("Crypter.unpad", allowed: [.invalidPadding])
        for _ in 0..<Budget.unpad {
            let input = mutator.next()
            do {
                let output = try Crypter.unpad(input)
                let expectedCount = input.count - Int(input.last ?? 0) - 1
                outcomes.accepted(output.count == expectedCount && output == Array(input.prefix(expectedCount)), input)
            } catch {
                outcomes.rejected(error, input)
            }
        }
        outcomes.check(total: Budget.unpad)
    }

    @Test func frameFromBytes() throws {
        let corpus = try FrameTests.file().vectors.map { hex($0.bytes) } + [UpdateMessage.frame(linking: nil).bytes]
        var mutator = Mutator(seed: 0xF4A3_0001, corpus: corpus, maxRandomLength: 32)
        var outcomes = Outcomes("Frame(bytes:)", allowed: [.invalidFrame])
        for _ in 0..<Budget.frame {
            let input = mutator.next()
            do {
                let frame = try Frame(bytes: input)
                outcomes.accepted(frame.bytes == input && frame.type.rawValue <= 3, input)
            } catch {
                outcomes.rejected(error, input)
            }
        }
        outcomes.check(total: Budget.frame)
    }

    @Test func postHandshakeParse() throws {
        let captures = try PostHandshakeMessageTests.captures().map { hex($0.plaintext) }
        let transcript = hex(try TranscriptQRInputs.load().post_handshake.messages[0].plaintext)
        let withLinking = PostHandshakeMessage(getInfo: CBOR.encode(SoftwareAuthenticator.getInfo.cbor), linking: [1: .bytes([1])], features: ["ctap", "dc"]).encode()
        let corpus = captures + [transcript, withLinking]
        let values = try corpus.map { try CBOR.decode($0) }
        var mutator = Mutator(seed: 0x9057_0001, corpus: corpus, maxRandomLength: 64)
        var valueMutator = CBORValueMutator(seed: 0x9057_0002)
        var outcomes = Outcomes("PostHandshakeMessage.parse", allowed: [.invalidPostHandshakeMessage])
        for index in 0..<Budget.postHandshake {
            // Two thirds byte-level, one third structure-level.
            let input = index % 3 == 2 ? CBOR.encode(valueMutator.mutate(values[index % values.count])) : mutator.next()
            do {
                let message = try PostHandshakeMessage.parse(input)
                let again = try? PostHandshakeMessage.parse(message.encode())
                let holds = message.effectiveFeatures.contains("ctap") && message.getInfo != nil
                    && (message.linking.map { $0.mapValue != nil } ?? true)
                    && again?.getInfo == message.getInfo && again?.linking == message.linking
                    && again.map { Set($0.effectiveFeatures) } == Set(message.effectiveFeatures)
                outcomes.accepted(holds, input)
            } catch {
                outcomes.rejected(error, input)
            }
        }
        outcomes.check(total: Budget.postHandshake)
    }

    @Test func updateParse() throws {
        let linking = try UpdateMessageTests.linkingInfo()
        let corpus = [UpdateMessage.frame(linking: nil).payload, UpdateMessage.frame(linking: linking).payload]
        let values = try corpus.map { try CBOR.decode($0) }
        var mutator = Mutator(seed: 0x0BDA_0001, corpus: corpus, maxRandomLength: 64)
        var valueMutator = CBORValueMutator(seed: 0x0BDA_0002)
        var outcomes = Outcomes("UpdateMessage.parse", allowed: [.invalidFrame, .invalidLinkingInfo])
        for index in 0..<Budget.update {
            let input = index.isMultiple(of: 2) ? CBOR.encode(valueMutator.mutate(values[index / 2 % values.count])) : mutator.next()
            do {
                let result = try UpdateMessage.parse(payload: input)
                let map = try? CBOR.decode(input).mapValue
                outcomes.accepted(map != nil && result == map?[1] && (result.map { $0.mapValue != nil } ?? true), input)
            } catch {
                outcomes.rejected(error, input)
            }
        }
        outcomes.check(total: Budget.update)
    }

    // MARK: - Linking

    @Test func linkingInfoFromCBOR() throws {
        let info = try UpdateMessageTests.linkingInfo()
        var with999 = info
        with999.fromNewImplementation = true
        let values = [info.cbor, with999.cbor]
        let corpus = values.map { CBOR.encode($0) }
        var mutator = Mutator(seed: 0x714C_0001, corpus: corpus, maxRandomLength: 64)
        var valueMutator = CBORValueMutator(seed: 0x714C_0002)
        var outcomes = Outcomes("LinkingInfo(cbor:)", allowed: [.invalidLinkingInfo])
        var index = 0
        while outcomes.accepted + outcomes.rejected < Budget.linkingInfo {
            defer { index += 1 }
            // Structure-level mutations, and byte-level ones that still decode as CBOR.
            let value: CBORValue
            if index % 4 == 3 {
                guard let decoded = try? CBOR.decode(mutator.next()) else { continue }
                value = decoded
            } else {
                value = valueMutator.mutate(values[index % values.count])
            }
            do {
                let parsed = try LinkingInfo(cbor: value)
                outcomes.accepted(
                    (try? LinkingInfo(cbor: parsed.cbor)) == parsed && parsed.pairingID.count == 8
                        && parsed.linkSecret.count == 32 && parsed.authenticatorPublicKey.count == 65
                        && parsed.handshakeSignature.count == 32,
                    CBOR.encode(value))
            } catch {
                outcomes.rejected(error, CBOR.encode(value))
            }
        }
        outcomes.check(total: Budget.linkingInfo)
        #expect(index < Budget.linkingInfo * 4, "too few byte-level mutations decoded as CBOR")
    }

    @Test("the budgets add up to at least 100,000 inputs")
    func budgetTotal() {
        let total = Budget.digits + Budget.qrPayload + Budget.eid + Budget.advert + Budget.initiatorFinish
            + Budget.respondQR + Budget.crypterDecrypt + Budget.unpad + Budget.frame + Budget.postHandshake
            + Budget.update + Budget.linkingInfo
        #expect(total >= 100_000)
    }
}

/// Valid EID plaintexts from the vectors, the seeds for `EID(bytes:)`.
enum AdvertAndEIDCorpus {
    static func plaintexts() throws -> [[UInt8]] {
        let eids = try AdvertTests.vectors().map { hex($0.eidPlaintext) }
        let t = try TranscriptQRInputs.load()
        let linked = try LinkedTranscriptInputs.load()
        return eids + [hex(t.advert.eid_plaintext_16), hex(linked.inputs.eid_plaintext_16)]
    }
}
