import CTAP2
import Crypto
import HybridCore

/// The BLE advert, its EID plaintext and the Noise handshake messages.
enum HandshakeTargets {
    static let all = [advert, eid, noiseInitiator, noiseResponder]

    static let qrSecret = [UInt8](repeating: 0x5A, count: 16)
    static let cipher = AdvertCipher(eidKey: QRSecretKeys(qrSecret: qrSecret).eidKey)
    static let samplePlaintext = EID(nonce: Array(repeating: 7, count: 10), routingID: [1, 2, 3], domain: TunnelDomainID(rawValue: 0)).bytes

    /// Trial decryption of a 20-byte advert with a fixed EID key. Random input is never "ours";
    /// a matched advert must give an EID whose bytes are the decrypted plaintext.
    static let advert = FuzzTarget(
        "advert", "AdvertCipher.decrypt (20-byte BLE advert); a match gives an EID that re-encodes to the plaintext",
        seeds: { [cipher.encrypt(plaintext: samplePlaintext)] }
    ) { input in
        switch cipher.decrypt(advert: input) {
        case .notOurs, .rejected: return .rejected
        case .matched(let plaintext, let eid):
            return FuzzTarget.check(
                eid.bytes == plaintext && cipher.encrypt(plaintext: plaintext) == input,
                "advert \(input.fuzzHex) matched with plaintext \(plaintext.fuzzHex)")
        }
    }

    /// `EID(bytes:)`: the 16-byte decrypted advert.
    static let eid = FuzzTarget(
        "eid", "EID(bytes:) (decrypted advert plaintext); bytes gives the input back and the domain resolves",
        seeds: { [samplePlaintext] }
    ) { input in
        guard let eid = try? EID(bytes: input) else { return .rejected }
        return FuzzTarget.check(eid.bytes == input && eid.domain.host != nil, "EID \(input.fuzzHex) does not round-trip")
    }

    static let initiator = NoiseHandshake.Initiator.qr(
        psk: FuzzKeys.psk, identityKey: FuzzKeys.identity, ephemeralKey: FuzzKeys.desktopEphemeral)
    static let genuineResponse: [UInt8] = {
        let (_, response) = try! NoiseHandshake.respondQR(
            to: initiator.message, psk: FuzzKeys.psk, peerIdentity: FuzzKeys.identity.publicKey,
            ephemeralKey: FuzzKeys.phoneEphemeral)
        return response
    }()

    /// The desktop reading the phone's handshake response (81 bytes: point and tag).
    static let noiseInitiator = FuzzTarget(
        "noise-initiator", "NoiseHandshake.Initiator.finish (the phone's KNpsk0 response); a forged response is never accepted",
        seeds: { [genuineResponse] }
    ) { input in
        guard let result = try? initiator.finish(response: input) else { return .rejected }
        // Without the PSK nobody can make the tag verify: only the genuine response may pass.
        return FuzzTarget.check(
            input == genuineResponse && result.handshakeHash.count == 32, "a forged handshake response was accepted: \(input.fuzzHex)")
    }

    /// The phone reading the desktop's first handshake message, in both patterns.
    static let noiseResponder = FuzzTarget(
        "noise-responder",
        "NoiseHandshake.respondQR and respondLinked (the desktop's first message); a forged message is never accepted",
        seeds: { [initiator.message] }
    ) { input in
        let qr = try? NoiseHandshake.respondQR(
            to: input, psk: FuzzKeys.psk, peerIdentity: FuzzKeys.identity.publicKey, ephemeralKey: FuzzKeys.phoneEphemeral)
        let linked = try? NoiseHandshake.respondLinked(
            to: input, psk: FuzzKeys.psk, identityKey: FuzzKeys.identity, ephemeralKey: FuzzKeys.phoneEphemeral)
        if linked != nil { return .violation("a forged linked handshake message was accepted: \(input.fuzzHex)") }
        guard let qr else { return .rejected }
        return FuzzTarget.check(
            input == initiator.message && qr.response == genuineResponse,
            "a forged QR handshake message was accepted: \(input.fuzzHex)")
    }
}
