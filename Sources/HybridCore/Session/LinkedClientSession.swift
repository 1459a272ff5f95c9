import CTAP2
import Crypto

/// What a session driver needs from a desktop session once the tunnel is up; both the QR-initiated
/// ``ClientSession`` and the linked ``LinkedClientSession`` provide it.
public protocol ClientTransaction: Sendable {
    /// Handshake message 1 to send now that the tunnel is joined and the advert matched.
    mutating func startHandshake() -> [UInt8]
    /// Processes one binary tunnel message (any error is fatal).
    mutating func receivedMessage(_ message: [UInt8]) throws(HybridError) -> [ClientSession.Action]
    /// Encrypts a CTAP2 request (command ‖ CBOR).
    mutating func encryptRequest(_ request: [UInt8]) throws(HybridError) -> [UInt8]
    /// Encrypts the shutdown message; the session is closed afterwards.
    mutating func encryptShutdown() throws(HybridError) -> [UInt8]
}

extension ClientSession: ClientTransaction {
    /// ``tunnelConnected(ephemeralKey:)`` with a fresh ephemeral key.
    public mutating func startHandshake() -> [UInt8] { tunnelConnected() }
}

/// The desktop side of a linked (state-assisted) transaction, as a pure state machine: no QR code;
/// the desktop contacts the phone through `/cable/contact/…`, recognises its advert under
/// `Derive(link secret, client nonce, 1, 64)` and runs `Noise_NKpsk0` against the phone's identity
/// key (Chromium `FidoTunnelDevice`, paired constructor; PROTOCOL §9).
///
/// ```
/// init(link:requestType:)  → contactPath, payload     driver opens /cable/contact/… with the payload header
/// receivedAdvert(_:)       → .matched                  (the tunnel is already open)
/// startHandshake()         → handshake message 1
/// receivedMessage(_:)      → [] (msg 2) / [.ready(getInfo)] / [.response(bytes)]
/// ```
/// Linking information arriving in a linked session is ignored, as Chromium does.
public struct LinkedClientSession: Sendable, ClientTransaction {
    /// What the desktop stored about a linked phone (the parts this session needs).
    public struct Link: Sendable, Hashable {
        /// Linking-map key 1.
        public var contactID: [UInt8]
        /// Linking-map key 2 (8 bytes).
        public var pairingID: [UInt8]
        /// Linking-map key 3 (32 bytes).
        public var linkSecret: [UInt8]
        /// Linking-map key 4, 65 bytes uncompressed.
        public var authenticatorPublicKey: [UInt8]

        /// Creates a link.
        public init(contactID: [UInt8], pairingID: [UInt8], linkSecret: [UInt8], authenticatorPublicKey: [UInt8]) {
            self.contactID = contactID
            self.pairingID = pairingID
            self.linkSecret = linkSecret
            self.authenticatorPublicKey = authenticatorPublicKey
        }

        /// The link carried by verified linking information.
        public init(_ info: LinkingInfo) {
            self.init(
                contactID: info.contactID, pairingID: info.pairingID, linkSecret: info.linkSecret,
                authenticatorPublicKey: info.authenticatorPublicKey)
        }
    }

    private enum State: Sendable {
        case waitingForAdvert
        case advertMatched(psk: [UInt8])
        case sentHandshake(NoiseHandshake.Initiator)
        case waitingForPostHandshake(Crypter)
        case established(ClientChannel)
        case closed
    }

    /// The link in use.
    public let link: Link
    /// The `X-caBLE-Client-Payload` contents.
    public let payload: ClientPayload
    /// `Derive(link secret, client nonce, 1, 64)`: the key the phone's advert must authenticate under.
    public let eidKey: [UInt8]
    private let peerIdentity: P256.KeyAgreement.PublicKey
    private let advertCipher: AdvertCipher
    private let random: RandomSource
    private let handshakeEphemeralKey: P256.KeyAgreement.PrivateKey?
    private var state: State = .waitingForAdvert
    /// Called once with the session's traffic keys when the handshake completes, for a key log
    /// (`--keylog`); `nil` (the default) logs nothing. The session itself does no I/O.
    public var keyLog: (@Sendable (SessionKeys) -> Void)? = nil

    /// Starts a linked transaction.
    /// - Parameters:
    ///   - link: the stored link (contact ID, pairing ID, link secret, the phone's public key).
    ///   - requestType: the kind of request, sent in the client payload.
    ///   - random: the source of the nonce, the Noise ephemeral key and the padding.
    ///   - clientNonce: fixes the 16-byte nonce (vectors); otherwise drawn from `random`.
    ///   - handshakeEphemeralKey: fixes the Noise ephemeral key (vectors); otherwise drawn from `random`.
    /// - Throws: ``HybridError/Code/invalidLinkingInfo`` when the stored link is malformed;
    ///   ``HybridError/Code/invalidLength`` for a `clientNonce` other than 16 bytes.
    public init(
        link: Link, requestType: QRPayload.RequestType, random: RandomSource = .system,
        clientNonce: [UInt8]? = nil, handshakeEphemeralKey: P256.KeyAgreement.PrivateKey? = nil
    ) throws(HybridError) {
        guard link.pairingID.count == HybridConstants.pairingIDSize, link.linkSecret.count == 32, !link.contactID.isEmpty else {
            throw HybridError(.invalidLinkingInfo, "stored link has a malformed contact ID, pairing ID or secret")
        }
        do {
            peerIdentity = try P256.KeyAgreement.PublicKey(x963Representation: link.authenticatorPublicKey)
        } catch {
            throw HybridError(.invalidLinkingInfo, "stored link's public key is not a valid P-256 point")
        }
        let nonce = clientNonce ?? random.bytes(ClientPayload.nonceSize)
        guard nonce.count == ClientPayload.nonceSize else {
            throw HybridError(.invalidLength, "client nonce is \(nonce.count) bytes, expected \(ClientPayload.nonceSize)")
        }
        self.link = link
        self.payload = ClientPayload(pairingID: link.pairingID, clientNonce: nonce, requestType: requestType)
        self.eidKey = derive(secret: link.linkSecret, salt: nonce, type: .eidKey, count: HybridConstants.eidKeySize)
        self.advertCipher = AdvertCipher(eidKey: eidKey)
        self.random = random
        self.handshakeEphemeralKey = handshakeEphemeralKey
    }

    /// `/cable/contact/{base64url(contact ID)}`.
    public var contactPath: String { TunnelServicePath.contact(contactID: link.contactID).path }

    /// Trial-decrypts an advert; the first valid match moves the session on.
    public mutating func receivedAdvert(_ advert: [UInt8]) -> ClientSession.AdvertOutcome {
        guard case .waitingForAdvert = state else { return .ignored }
        switch advertCipher.decrypt(advert: advert) {
        case .notOurs:
            return .ignored
        case .rejected(let error):
            return .rejected(error)
        case .matched(let plaintext, let eid):
            state = .advertMatched(psk: derivePSK(secret: link.linkSecret, eidPlaintext: plaintext))
            return .matched(eid: eid, connectPath: contactPath)
        }
    }

    /// Handshake message 1 (`Noise_NKpsk0`, 81 bytes).
    public mutating func startHandshake() -> [UInt8] {
        guard case .advertMatched(let psk) = state else {
            preconditionFailure("startHandshake() before an advert matched (state \(state))")
        }
        let initiator = NoiseHandshake.Initiator.linked(
            psk: psk, peerIdentity: peerIdentity, ephemeralKey: handshakeEphemeralKey ?? random.keyAgreementKey())
        state = .sentHandshake(initiator)
        return initiator.message
    }

    /// Processes one binary tunnel message. Any error is fatal.
    public mutating func receivedMessage(_ message: [UInt8]) throws(HybridError) -> [ClientSession.Action] {
        do {
            return try process(message)
        } catch {
            state = .closed
            throw error
        }
    }

    private mutating func process(_ message: [UInt8]) throws(HybridError) -> [ClientSession.Action] {
        switch state {
        case .sentHandshake(let initiator):
            let result = try initiator.finish(response: message)
            keyLog?(result.keys)
            state = .waitingForPostHandshake(result.crypter)
            return []
        case .waitingForPostHandshake(var crypter):
            let post = try PostHandshakeMessage.parse(try crypter.decrypt(message))
            state = .established(ClientChannel(crypter: crypter))
            return [.ready(getInfo: post.getInfo ?? [])]  // linking in a linked session: ignored
        case .established(var channel):
            let received = try channel.received(message)  // an update must be valid CBOR; then it is ignored
            state = .established(channel)
            if case .response(let bytes) = received { return [.response(bytes)] }
            return []
        case .waitingForAdvert, .advertMatched:
            throw HybridError(.unexpectedMessage, "tunnel message before the handshake started")
        case .closed:
            throw HybridError(.unexpectedMessage, "tunnel message after the session closed")
        }
    }

    /// Encrypts a CTAP2 request as a `kCTAP` frame, after `.ready`.
    public mutating func encryptRequest(_ request: [UInt8]) throws(HybridError) -> [UInt8] {
        guard case .established(var channel) = state, !channel.awaitingResponse else {
            preconditionFailure("encryptRequest(_:) while not ready for a request (state \(state))")
        }
        let ciphertext = try channel.encryptRequest(request)
        state = .established(channel)
        return ciphertext
    }

    /// Encrypts the shutdown message (`00`); the session is closed afterwards.
    public mutating func encryptShutdown() throws(HybridError) -> [UInt8] {
        guard case .established(var channel) = state else {
            preconditionFailure("encryptShutdown() before the session was established (state \(state))")
        }
        state = .closed
        return try channel.encryptShutdown()
    }
}
