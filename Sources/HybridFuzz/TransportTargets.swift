import CTAP2
import HybridCore

/// The encrypted tunnel: Crypter frames and padding, message frames, the post-handshake message,
/// update messages and the linking information they carry; the tunnel service's request targets.
enum TransportTargets {
    static let all = [crypter, crypterUnpad, frame, postHandshake, update, linkingInfo, tunnelPath]

    /// `TunnelServicePath(parsing:)` on the input as UTF-8 (invalid sequences replaced): whatever it
    /// accepts is one of the three shapes spelled canonically, up to the case of the hex digits.
    static let tunnelPath = FuzzTarget(
        "tunnel-path",
        "TunnelServicePath(parsing:) (the relay's request targets); an accepted target is its canonical path, up to the case of its hex digits",
        seeds: {
            [
                Array("/cable/new/68656C6C6F2C20776562617574686E21".utf8),
                Array("/cable/connect/c0ffee/68656c6c6f2c20776562617574686e21".utf8),
                Array("/cable/contact/AAECAwQFBgcICQoLDA0ODxAREhM".utf8),
                Array("/cable/new/\u{301}68656C6C6F2C20776562617574686E21".utf8),
            ]
        }
    ) { input in
        let target = String(decoding: input, as: UTF8.self)
        guard let path = TunnelServicePath(parsing: target) else { return .rejected }
        // The canonical path spells hex digits in upper case (and nothing else in A-F); the parser
        // also takes them in lower case. Everything else must be as canonical.
        let spelled = Array(target.utf8)
        let expected = Array(path.path.utf8)
        let canonical =
            spelled.count == expected.count
            && zip(spelled, expected).allSatisfy { byte, want in
                byte == want || ((0x41...0x46).contains(want) && byte == want + 0x20)
            }
        guard canonical else { return .violation("accepted \(input.fuzzHex) as \(path.path)") }
        return FuzzTarget.check(TunnelServicePath(parsing: path.path) == path, "\(path.path) does not parse back")
    }

    static let readKey = [UInt8](repeating: 0x11, count: 32)
    static let writeKey = [UInt8](repeating: 0x22, count: 32)

    static func sealed(_ message: [UInt8]) -> [UInt8] {
        var sender = Crypter(readKey: writeKey, writeKey: readKey)
        return try! sender.encrypt(message)
    }

    /// `Crypter.decrypt` at sequence 0 with fixed keys. Only what the peer sealed opens; a failure
    /// leaves the sequence where it was.
    static let crypter = FuzzTarget(
        "crypter", "Crypter.decrypt (AES-256-GCM frame, sequence 0); an opened frame re-seals to the input, a refused one leaves the sequence",
        seeds: { [sealed([]), sealed([1, 2, 3]), sealed(Array(repeating: 0xA5, count: 64))] }
    ) { input in
        var receiver = Crypter(readKey: readKey, writeKey: writeKey)
        do {
            let plaintext = try receiver.decrypt(input)
            return FuzzTarget.check(
                receiver.readSequence == 1 && sealed(plaintext) == input, "frame \(input.fuzzHex) opened to \(plaintext.fuzzHex)")
        } catch {
            return receiver.readSequence == 0 ? .rejected : .violation("the sequence moved on a refused frame")
        }
    }

    /// `Crypter.unpad`: the padding rule after decryption.
    static let crypterUnpad = FuzzTarget(
        "crypter-unpad", "Crypter.unpad (trailing pad-length byte); the result is the input's prefix and pads back to a valid block",
        seeds: { [Crypter.pad([]), Crypter.pad([1, 2, 3]), Crypter.pad(Array(repeating: 9, count: 40))] }
    ) { input in
        guard let output = try? Crypter.unpad(input) else { return .rejected }
        let expected = input.count - Int(input.last ?? 0) - 1
        return FuzzTarget.check(
            output.count == expected && output == Array(input.prefix(expected)) && (try? Crypter.unpad(Crypter.pad(output))) == output,
            "unpad \(input.fuzzHex) gave \(output.fuzzHex)")
    }

    /// `Frame(bytes:)`: a message type byte and its payload.
    static let frame = FuzzTarget(
        "frame", "Frame(bytes:) (type byte and payload); bytes gives the input back",
        seeds: { [Frame(type: .ctap, payload: [0x04]).bytes, UpdateMessage.frame(linking: nil).bytes, [0x00]] }
    ) { input in
        guard let frame = try? Frame(bytes: input) else { return .rejected }
        return FuzzTarget.check(frame.bytes == input && frame.type.rawValue <= 3, "frame \(input.fuzzHex) does not round-trip")
    }

    static let sampleLinking = LinkingInfo(
        contactID: Array(repeating: 0xC0, count: 40), pairingID: Array(repeating: 0xB0, count: 8),
        linkSecret: Array(repeating: 0x5E, count: 32), authenticatorPublicKey: Array(FuzzKeys.identity.publicKey.x963Representation),
        name: "Fuzz phone", handshakeSignature: Array(repeating: 0x51, count: 32))

    /// `PostHandshakeMessage.parse`: the phone's first message (getInfo, linking, features).
    static let postHandshake = FuzzTarget(
        "post-handshake", "PostHandshakeMessage.parse (both revisions); the parsed message survives its own encoding",
        seeds: {
            [
                PostHandshakeMessage(getInfo: CBOR.encode(SoftwareAuthenticator.getInfo.cbor)).encode(),
                PostHandshakeMessage(getInfo: CBOR.encode(SoftwareAuthenticator.getInfo.cbor), linking: sampleLinking.cbor, features: ["ctap", "dc"]).encode(),
            ]
        }
    ) { input in
        guard let message = try? PostHandshakeMessage.parse(input) else { return .rejected }
        let again = try? PostHandshakeMessage.parse(message.encode())
        return FuzzTarget.check(
            message.effectiveFeatures.contains("ctap") && message.getInfo != nil
                && (message.linking.map { $0.mapValue != nil } ?? true)
                && again?.getInfo == message.getInfo && again?.linking == message.linking
                && again.map { Set($0.effectiveFeatures) } == Set(message.effectiveFeatures),
            "post-handshake message \(input.fuzzHex) does not survive its encoding")
    }

    /// `UpdateMessage.parse`: the payload of an update frame (optional linking map under key 1).
    static let update = FuzzTarget(
        "update", "UpdateMessage.parse (update frame payload); the linking value is key 1 of the input map",
        seeds: { [UpdateMessage.frame(linking: nil).payload, UpdateMessage.frame(linking: sampleLinking).payload] }
    ) { input in
        let linking: CBORValue?
        do { linking = try UpdateMessage.parse(payload: input) } catch { return .rejected }
        let map = (try? CBOR.decode(input))?.mapValue
        return FuzzTarget.check(
            map != nil && linking == map?[1] && (linking.map { $0.mapValue != nil } ?? true),
            "update \(input.fuzzHex) parsed to a linking value not in the input")
    }

    /// `LinkingInfo(cbor:)` on decoded CBOR.
    static let linkingInfo = FuzzTarget(
        "linking-info", "LinkingInfo(cbor:) (the linking map, keys 1-6 and 999); the result survives its own map with Chromium's sizes",
        seeds: { [CBOR.encode(sampleLinking.cbor)] }
    ) { input in
        guard let value = try? CBOR.decode(input), let info = try? LinkingInfo(cbor: value) else { return .rejected }
        return FuzzTarget.check(
            (try? LinkingInfo(cbor: info.cbor)) == info && info.pairingID.count == 8 && info.linkSecret.count == 32
                && info.authenticatorPublicKey.count == 65 && info.handshakeSignature.count == 32,
            "linking info \(input.fuzzHex) does not survive its own map")
    }
}
