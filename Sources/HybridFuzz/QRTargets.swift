import CTAP2
import Crypto
import HybridCore

/// The QR code's `FIDO:/` digits and the payload map they carry.
enum QRTargets {
    static let all = [digits, qrURL, qrPayload]

    /// A payload around a fixed key, as a desktop shows it.
    static func samplePayloads() -> [QRPayload] {
        let key = FuzzKeys.identity.publicKey.compressedRepresentation
        let secret = [UInt8](repeating: 0x5A, count: 16)
        return [
            QRPayload(compressedPublicKey: Array(key), secret: secret),
            QRPayload(
                compressedPublicKey: Array(key), secret: secret, timestamp: 1_760_000_000, supportsLinking: true,
                requestType: .makeCredential),
        ]
    }

    /// `Digits.decode`: whatever decodes re-encodes to the same digits.
    static let digits = FuzzTarget(
        "digits", "Digits.decode (FIDO:/ digit groups); decode then encode gives the input back",
        seeds: { samplePayloads().map { Array(Digits.encode(CBOR.encode($0.cbor)).utf8) } }
    ) { input in
        let text = String(decoding: input, as: UTF8.self)
        guard let bytes = try? Digits.decode(text) else { return .rejected }
        return FuzzTarget.check(Digits.encode(bytes) == text, "digits \(text) decode to \(bytes.fuzzHex), which re-encode differently")
    }

    /// `QRPayload(url:)`: an accepted URL's payload survives its own URL, with the right key sizes.
    static let qrURL = FuzzTarget(
        "qr-url", "QRPayload(url:) (the whole FIDO:/ URL); the payload re-encodes to a URL that decodes to it",
        seeds: { samplePayloads().map { Array($0.url.utf8) } }
    ) { input in
        guard let payload = try? QRPayload(url: String(decoding: input, as: UTF8.self)) else { return .rejected }
        return roundTrip(payload)
    }

    /// `QRPayload(cbor:)` on decoded CBOR: the same invariant, reached without the digit layer.
    static let qrPayload = FuzzTarget(
        "qr-payload", "QRPayload(cbor:) on the decoded CBOR map; the payload re-encodes to a URL that decodes to it",
        seeds: { samplePayloads().map { CBOR.encode($0.cbor) } }
    ) { input in
        guard let value = try? CBOR.decode(input), let payload = try? QRPayload(cbor: value) else { return .rejected }
        return roundTrip(payload)
    }

    static func roundTrip(_ payload: QRPayload) -> FuzzOutcome {
        let again = try? QRPayload(url: payload.url)
        return FuzzTarget.check(
            again == payload && payload.compressedPublicKey.count == 33 && payload.secret.count == 16,
            "payload \(CBOR.encode(payload.cbor).fuzzHex) does not survive its own URL")
    }
}

/// Fixed keys (never secret: fuzzing only) so handshake targets are deterministic.
enum FuzzKeys {
    static func key(_ byte: UInt8) -> P256.KeyAgreement.PrivateKey {
        // Scalars 0x0101…01, 0x0202…02, …: valid, below the group order.
        try! P256.KeyAgreement.PrivateKey(rawRepresentation: [UInt8](repeating: byte, count: 32))
    }
    static let identity = key(1)
    static let desktopEphemeral = key(2)
    static let phoneEphemeral = key(3)
    static let psk = [UInt8](repeating: 0x44, count: 32)
}
