import CTAP2
import Crypto

/// The desktop (client platform, Noise initiator) side of a QR-initiated hybrid transaction, as a
/// pure state machine: it performs no I/O and returns what its driver must do.
///
/// ```
/// init → url (show as QR)
/// receivedAdvert(_:)  → .matched(connect path)       driver joins /cable/connect/…
/// tunnelConnected()   → handshake message 1           driver sends it
/// receivedMessage(_:) → [] (msg 2) / [.ready(getInfo)] (post-handshake) / [.linked(info)] / [.response(bytes)]
/// encryptRequest(_:)  → ciphertext                    driver sends it
/// encryptShutdown()   → ciphertext                    driver sends it and closes
/// ```
/// Mirrors Chromium `FidoTunnelDevice` (QR constructor) and `cablev2::HandshakeInitiator`.
public struct ClientSession: Sendable {
    /// What the driver must do after a message arrived.
    public enum Action: Sendable, Hashable {
        /// The authenticator is ready; its getInfo response (CBOR). Requests may now be sent.
        case ready(getInfo: [UInt8])
        /// The phone sent linking information and its signature verified.
        case linked(LinkingInfo)
        /// A CTAP2 response: status byte ‖ CBOR.
        case response([UInt8])
    }

    /// The result of offering an advert to the session.
    public enum AdvertOutcome: Sendable, Hashable {
        /// The advert is this session's: join the tunnel at this path on the relay for `eid.domain`.
        case matched(eid: EID, connectPath: String)
        /// Not this session's advert (other sessions are normal traffic), or a repeat.
        case ignored
        /// Authenticated by this session's key but invalid (reserved byte, unknown domain).
        case rejected(HybridError)
    }

    private enum State: Sendable {
        /// The QR code is shown; waiting for the phone's advert.
        case waitingForAdvert
        /// An advert matched; waiting for the driver to join the tunnel.
        case advertMatched(psk: [UInt8])
        /// Message 1 sent; waiting for message 2.
        case sentHandshake(NoiseHandshake.Initiator)
        /// Handshake done; waiting for the post-handshake message.
        case waitingForPostHandshake(Crypter, handshakeHash: [UInt8])
        /// Ready for requests, or waiting for the response to one.
        case established(ClientChannel, handshakeHash: [UInt8])
        /// Shutdown sent or a fatal error seen; nothing more happens.
        case closed
    }

    /// The QR code contents.
    public let qrPayload: QRPayload
    /// Values derived from the QR secret (EID key, tunnel ID).
    package let keys: QRSecretKeys
    /// `Derive(QR secret, empty, 1, 64)`: the key the phone's advert must authenticate under (what a
    /// proximity scanner matches adverts with, as ``LinkedClientSession/eidKey`` for a linked session).
    public var eidKey: [UInt8] { keys.eidKey }
    private let identityKey: P256.KeyAgreement.PrivateKey
    private let advertCipher: AdvertCipher
    private let random: RandomSource
    private var state: State = .waitingForAdvert
    /// Called once with the session's traffic keys when the handshake completes, for a key log
    /// (`--keylog`); `nil` (the default) logs nothing. The session itself does no I/O.
    public var keyLog: (@Sendable (SessionKeys) -> Void)? = nil

    /// Starts a session: a fresh identity key and QR secret from `random`, unless given.
    /// - Parameters:
    ///   - requestType: the hint in QR key 5.
    ///   - timestamp: QR key 3, seconds since the Unix epoch (time is injected; the core reads no clock).
    ///   - supportsLinking: QR key 4; `nil` omits it.
    ///   - random: the source of the keys, the Noise ephemeral key and the padding.
    ///   - identityKey: fixes the desktop's identity key, whose public half is QR key 0 (vectors).
    ///   - qrSecret: fixes the 16-byte QR secret, QR key 1 (vectors); another length traps (a
    ///     value the caller chose, as ``EID/init(nonce:routingID:domain:)``'s sizes).
    public init(
        requestType: QRPayload.RequestType, timestamp: UInt64, supportsLinking: Bool? = false,
        random: RandomSource = .system,
        identityKey: P256.KeyAgreement.PrivateKey? = nil, qrSecret: [UInt8]? = nil
    ) {
        let identityKey = identityKey ?? random.keyAgreementKey()
        let secret = qrSecret ?? random.bytes(HybridConstants.qrSecretSize)
        precondition(secret.count == HybridConstants.qrSecretSize, "QR secret must be 16 bytes")
        self.identityKey = identityKey
        self.random = random
        self.qrPayload = QRPayload(
            compressedPublicKey: Array(identityKey.publicKey.compressedRepresentation), secret: secret,
            knownDomainCount: UInt64(HybridConstants.assignedDomainCount), timestamp: timestamp,
            supportsLinking: supportsLinking, requestType: requestType)
        self.keys = QRSecretKeys(qrSecret: secret)
        self.advertCipher = AdvertCipher(eidKey: keys.eidKey)
    }

    /// The `FIDO:/` URL to show.
    public var url: String { qrPayload.url }

    /// Whether the handshake has completed and the post-handshake message arrived.
    public var isEstablished: Bool {
        if case .established = state { return true }
        return false
    }

    /// Trial-decrypts an advert (Chromium `eid::Decrypt`). The first valid match moves the session
    /// on; every later advert is ignored, as Chromium ignores adverts once one matched.
    public mutating func receivedAdvert(_ advert: [UInt8]) -> AdvertOutcome {
        guard case .waitingForAdvert = state else { return .ignored }
        switch advertCipher.decrypt(advert: advert) {
        case .notOurs:
            return .ignored
        case .rejected(let error):
            return .rejected(error)
        case .matched(let plaintext, let eid):
            state = .advertMatched(psk: derivePSK(secret: qrPayload.secret, eidPlaintext: plaintext))
            return .matched(
                eid: eid, connectPath: TunnelServicePath.connect(routingID: eid.routingID, tunnelID: keys.tunnelID).path)
        }
    }

    /// The tunnel is joined: returns handshake message 1 (81 bytes) to send.
    public mutating func tunnelConnected(ephemeralKey: P256.KeyAgreement.PrivateKey? = nil) -> [UInt8] {
        guard case .advertMatched(let psk) = state else {
            preconditionFailure("tunnelConnected() before an advert matched (state \(state))")
        }
        let initiator = NoiseHandshake.Initiator.qr(
            psk: psk, identityKey: identityKey, ephemeralKey: ephemeralKey ?? random.keyAgreementKey())
        state = .sentHandshake(initiator)
        return initiator.message
    }

    /// Processes one binary tunnel message. Any error is fatal: the session closes and the driver
    /// must close the tunnel.
    public mutating func receivedMessage(_ message: [UInt8]) throws(HybridError) -> [Action] {
        do {
            return try process(message)
        } catch {
            state = .closed
            throw error
        }
    }

    private mutating func process(_ message: [UInt8]) throws(HybridError) -> [Action] {
        switch state {
        case .sentHandshake(let initiator):
            let result = try initiator.finish(response: message)
            keyLog?(result.keys)
            state = .waitingForPostHandshake(result.crypter, handshakeHash: result.handshakeHash)
            return []
        case .waitingForPostHandshake(var crypter, let hash):
            let plaintext = try crypter.decrypt(message)
            let post = try PostHandshakeMessage.parse(plaintext)
            var actions: [Action] = []
            if let linking = post.linking, offersLinking {
                actions.append(.linked(try verifiedLinking(linking, handshakeHash: hash)))
            }
            state = .established(ClientChannel(crypter: crypter), handshakeHash: hash)
            return [.ready(getInfo: post.getInfo ?? [])] + actions
        case .established(var channel, let hash):
            let received = try channel.received(message)
            state = .established(channel, handshakeHash: hash)
            switch received {
            case .update(nil): return []
            case .update(let linking?):
                return offersLinking ? [.linked(try verifiedLinking(linking, handshakeHash: hash))] : []
            case .response(let bytes): return [.response(bytes)]
            }
        case .waitingForAdvert, .advertMatched:
            throw HybridError(.unexpectedMessage, "tunnel message before the handshake started")
        case .closed:
            throw HybridError(.unexpectedMessage, "tunnel message after the session closed")
        }
    }

    /// The size on the wire of `request` (command byte ‖ CBOR) once ``encryptRequest(_:)`` made it a
    /// `kCTAP` frame (type byte, padding, tag): what the tunnel service must carry in one message.
    public static func encryptedSize(ofRequest request: [UInt8]) -> Int {
        Crypter.ciphertextLength(plaintext: Frame(type: .ctap, payload: request).bytes.count)
    }

    /// Encrypts a CTAP2 request (command byte ‖ CBOR) as a `kCTAP` frame. Call after `.ready`, one
    /// request at a time.
    public mutating func encryptRequest(_ request: [UInt8]) throws(HybridError) -> [UInt8] {
        guard case .established(var channel, let hash) = state, !channel.awaitingResponse else {
            preconditionFailure("encryptRequest(_:) while not ready for a request (state \(state))")
        }
        let ciphertext = try channel.encryptRequest(request)
        state = .established(channel, handshakeHash: hash)
        return ciphertext
    }

    /// Encrypts the shutdown message (`00`); the session is closed afterwards.
    public mutating func encryptShutdown() throws(HybridError) -> [UInt8] {
        guard case .established(var channel, _) = state else {
            preconditionFailure("encryptShutdown() before the session was established (state \(state))")
        }
        state = .closed
        return try channel.encryptShutdown()
    }

    /// Whether the QR code said this desktop can store linking information (key 4). When it did not,
    /// linking information a phone sends anyway is ignored, unread, as Chromium's desktop discards it
    /// when it has no pairing callback (`fido_tunnel_device.cc`, `ProcessUpdate`): a phone that
    /// links regardless of key 4 must not fail a sign-in that asked for no link.
    private var offersLinking: Bool { qrPayload.supportsLinking == true }

    private func verifiedLinking(_ map: CBORValue, handshakeHash: [UInt8]) throws(HybridError) -> LinkingInfo {
        let info = try LinkingInfo(cbor: map)
        try info.verify(clientIdentity: identityKey, handshakeHash: handshakeHash)
        return info
    }
}
