import Crypto

/// The caBLE Noise handshakes, both with P-256, AES-256-GCM and SHA-256, and empty payloads:
///
/// - QR flow, `Noise_KNpsk0_P256_AESGCM_SHA256`, prologue `0x01`: the initiator (desktop) has a static
///   key the responder (phone) knows from the QR code.
/// - Linked flow, `Noise_NKpsk0_P256_AESGCM_SHA256`, prologue `0x00`: the responder (phone) has a static
///   identity key the initiator learned from linking information.
///
/// Each handshake message is a 65-byte uncompressed ephemeral point ‖ a 16-byte AES-GCM tag.
/// Mirrors Chromium `HandshakeInitiator` and `RespondToHandshake` (`v2_handshake.cc`).
package enum NoiseHandshake {
    /// Which handshake, with the static key each side needs.
    package enum Pattern: Sendable {
        /// QR flow (`KNpsk0`): the desktop's static identity key, private on the desktop side.
        case knpsk0
        /// Linked flow (`NKpsk0`): the phone's static identity key.
        case nkpsk0

        /// The 32-byte protocol name (31 characters and a NUL).
        package var protocolName: [UInt8] {
            switch self {
            case .knpsk0: return Array("Noise_KNpsk0_P256_AESGCM_SHA256".utf8) + [0]
            case .nkpsk0: return Array("Noise_NKpsk0_P256_AESGCM_SHA256".utf8) + [0]
            }
        }

        /// The prologue byte: 1 for the QR flow, 0 for the linked flow.
        package var prologue: UInt8 {
            switch self {
            case .knpsk0: return 1
            case .nkpsk0: return 0
            }
        }
    }

    /// What a completed handshake yields (Chromium `HandshakeResult`).
    package struct Result: Sendable {
        /// The transport cipher for this side, sequence numbers at zero.
        package var crypter: Crypter
        /// The final handshake hash, the channel binding for the linking signature.
        package let handshakeHash: [UInt8]
        /// The traffic keys and handshake hash, for a key log (``SessionKeys``).
        package let keys: SessionKeys
    }

    /// The desktop's side: build message 1, then process message 2.
    package struct Initiator: Sendable {
        private var state: SymmetricState
        private let ephemeral: P256.KeyAgreement.PrivateKey
        private let pattern: Pattern
        private let localStatic: P256.KeyAgreement.PrivateKey?
        private let remoteStatic: P256.KeyAgreement.PublicKey?
        /// Message 1 (81 bytes) to send.
        package let message: [UInt8]

        /// Starts a QR-flow (`KNpsk0`) handshake with the desktop's QR identity key.
        package static func qr(
            psk: [UInt8], identityKey: P256.KeyAgreement.PrivateKey, ephemeralKey: P256.KeyAgreement.PrivateKey
        ) -> Initiator {
            Initiator(pattern: .knpsk0, psk: psk, premessageKey: identityKey.publicKey,
                      localStatic: identityKey, remoteStatic: nil, ephemeral: ephemeralKey)
        }

        /// Starts a linked-flow (`NKpsk0`) handshake with the phone's identity public key.
        package static func linked(
            psk: [UInt8], peerIdentity: P256.KeyAgreement.PublicKey, ephemeralKey: P256.KeyAgreement.PrivateKey
        ) -> Initiator {
            Initiator(pattern: .nkpsk0, psk: psk, premessageKey: peerIdentity,
                      localStatic: nil, remoteStatic: peerIdentity, ephemeral: ephemeralKey)
        }

        private init(
            pattern: Pattern, psk: [UInt8], premessageKey: P256.KeyAgreement.PublicKey,
            localStatic: P256.KeyAgreement.PrivateKey?, remoteStatic: P256.KeyAgreement.PublicKey?,
            ephemeral: P256.KeyAgreement.PrivateKey
        ) {
            precondition(psk.count == HybridConstants.pskSize, "PSK must be 32 bytes")
            var state = NoiseHandshake.initialState(pattern: pattern, premessageKey: premessageKey, psk: psk)
            let ephemeralPoint = Array(ephemeral.publicKey.x963Representation)
            state.mixHash(ephemeralPoint)  // "e"
            state.mixKey(ephemeralPoint)  // psk-mode MixKey for "e"
            if let remoteStatic {  // "es" (NK only)
                state.mixKey(NoiseHandshake.dh(ephemeral, remoteStatic))
            }
            let tag = state.encryptAndHash([])
            self.state = state
            self.pattern = pattern
            self.ephemeral = ephemeral
            self.localStatic = localStatic
            self.remoteStatic = remoteStatic
            self.message = ephemeralPoint + tag
        }

        /// Processes message 2, which must be exactly 81 bytes (Chromium `kResponseSize`), and
        /// returns the desktop's transport keys (write k1, read k2).
        package func finish(response: [UInt8]) throws(HybridError) -> Result {
            guard response.count == HybridConstants.handshakeMessageSize else {
                throw HybridError(.handshakeFailed, "handshake response is \(response.count) bytes, expected 81")
            }
            var state = self.state
            let peerPoint = Array(response[0..<65])
            let peerEphemeral = try NoiseHandshake.point(peerPoint)
            state.mixHash(peerPoint)
            state.mixKey(peerPoint)
            state.mixKey(NoiseHandshake.dh(ephemeral, peerEphemeral))  // "ee"
            if let localStatic {  // "se" (KN only)
                state.mixKey(NoiseHandshake.dh(localStatic, peerEphemeral))
            }
            let payload = try state.decryptAndHash(Array(response[65...]))
            guard payload.isEmpty else { throw HybridError(.handshakeFailed, "handshake response carries a payload") }
            let keys = state.split()
            return Result(
                crypter: Crypter(readKey: keys.responderToInitiator, writeKey: keys.initiatorToResponder),
                handshakeHash: state.handshakeHash,
                keys: SessionKeys(
                    initiatorEphemeral: Array(message[0..<65]), handshakeHash: state.handshakeHash,
                    initiatorToResponder: keys.initiatorToResponder, responderToInitiator: keys.responderToInitiator))
        }
    }

    /// The phone's side of the QR flow: process message 1 and build message 2.
    /// Returns the phone's transport keys (read k1, write k2) and the response to send.
    package static func respondQR(
        to message: [UInt8], psk: [UInt8], peerIdentity: P256.KeyAgreement.PublicKey,
        ephemeralKey: P256.KeyAgreement.PrivateKey
    ) throws(HybridError) -> (result: Result, response: [UInt8]) {
        try respond(pattern: .knpsk0, to: message, psk: psk, premessageKey: peerIdentity,
                    localStatic: nil, remoteStatic: peerIdentity, ephemeral: ephemeralKey)
    }

    /// The phone's side of the linked flow, with its long-term identity key.
    package static func respondLinked(
        to message: [UInt8], psk: [UInt8], identityKey: P256.KeyAgreement.PrivateKey,
        ephemeralKey: P256.KeyAgreement.PrivateKey
    ) throws(HybridError) -> (result: Result, response: [UInt8]) {
        try respond(pattern: .nkpsk0, to: message, psk: psk, premessageKey: identityKey.publicKey,
                    localStatic: identityKey, remoteStatic: nil, ephemeral: ephemeralKey)
    }

    private static func respond(
        pattern: Pattern, to message: [UInt8], psk: [UInt8], premessageKey: P256.KeyAgreement.PublicKey,
        localStatic: P256.KeyAgreement.PrivateKey?, remoteStatic: P256.KeyAgreement.PublicKey?,
        ephemeral: P256.KeyAgreement.PrivateKey
    ) throws(HybridError) -> (result: Result, response: [UInt8]) {
        precondition(psk.count == HybridConstants.pskSize, "PSK must be 32 bytes")
        guard message.count >= 65 else {
            throw HybridError(.handshakeFailed, "handshake message is \(message.count) bytes, shorter than a P-256 point")
        }
        var state = initialState(pattern: pattern, premessageKey: premessageKey, psk: psk)
        let peerPoint = Array(message[0..<65])
        let peerEphemeral = try point(peerPoint)
        state.mixHash(peerPoint)
        state.mixKey(peerPoint)
        if let localStatic {  // "es" seen from the responder (NK)
            state.mixKey(dh(localStatic, peerEphemeral))
        }
        let payload: [UInt8]
        do {
            payload = try state.decryptAndHash(Array(message[65...]))
        } catch where message.count > HybridConstants.handshakeMessageSize {
            // A hybrid handshake message has an empty payload: one longer than 81 bytes that does
            // not authenticate most likely carries bytes it should not.
            throw HybridError(
                .handshakeFailed,
                "\(error.reason); it is \(message.count) bytes, where a handshake message with the empty payload hybrid uses is 81")
        }
        guard payload.isEmpty else { throw HybridError(.handshakeFailed, "handshake message carries a payload") }

        let ephemeralPoint = Array(ephemeral.publicKey.x963Representation)
        state.mixHash(ephemeralPoint)
        state.mixKey(ephemeralPoint)
        state.mixKey(dh(ephemeral, peerEphemeral))  // "ee"
        if let remoteStatic {  // "se" seen from the responder (KN)
            state.mixKey(dh(ephemeral, remoteStatic))
        }
        let tag = state.encryptAndHash([])
        let keys = state.split()
        let result = Result(
            crypter: Crypter(readKey: keys.initiatorToResponder, writeKey: keys.responderToInitiator),
            handshakeHash: state.handshakeHash,
            keys: SessionKeys(
                initiatorEphemeral: peerPoint, handshakeHash: state.handshakeHash,
                initiatorToResponder: keys.initiatorToResponder, responderToInitiator: keys.responderToInitiator))
        return (result, ephemeralPoint + tag)
    }

    /// `h = ck = name; MixHash(prologue); MixHash(static pre-message key); MixKeyAndHash(psk)`.
    static func initialState(
        pattern: Pattern, premessageKey: P256.KeyAgreement.PublicKey, psk: [UInt8]
    ) -> SymmetricState {
        var state = SymmetricState(protocolName: pattern.protocolName)
        state.mixHash([pattern.prologue])
        state.mixHash(Array(premessageKey.x963Representation))
        state.mixKeyAndHash(psk)
        return state
    }

    /// P-256 ECDH: the 32-byte x-coordinate.
    static func dh(_ privateKey: P256.KeyAgreement.PrivateKey, _ publicKey: P256.KeyAgreement.PublicKey) -> [UInt8] {
        do {
            return try privateKey.sharedSecretFromKeyAgreement(with: publicKey).withUnsafeBytes { Array($0) }
        } catch {
            preconditionFailure("ECDH between valid P-256 keys cannot fail: \(error)")
        }
    }

    static func point(_ bytes: [UInt8]) throws(HybridError) -> P256.KeyAgreement.PublicKey {
        do {
            return try P256.KeyAgreement.PublicKey(x963Representation: bytes)
        } catch {
            throw HybridError(.handshakeFailed, "ephemeral key is not a valid uncompressed P-256 point")
        }
    }
}
