import CTAP2
import Crypto

/// The phone (authenticator, Noise responder) side of a QR-initiated hybrid transaction, as a pure
/// state machine: it performs no I/O and returns what its driver must do.
///
/// ```
/// init(qr:getInfo:…)                → newTunnelPath     driver opens /cable/new/…, learns the routing ID
/// tunnelCreated(routingID:nonce:)   → 20-byte advert    driver advertises it until the handshake is done
/// receivedMessage(_:) (Noise msg 1) → [.send(msg2), .handshakeComplete, .send(post-handshake), .send(update)]
/// receivedMessage(_:)               → [.request(cmd ‖ CBOR)]    driver asks its authenticator
/// encryptResponse(_:)               → ciphertext        driver sends it
/// receivedMessage(_:)               → [.shutdown]       driver closes
/// ```
/// Mirrors the Chromium phone (`v2_authenticator.cc`, QR path, protocol revision 1, Chromium padding
/// of the update message).
public struct AuthenticatorSession: Sendable {
    /// What the driver must do after a message arrived.
    public enum Action: Sendable, Hashable {
        /// Send this binary message on the tunnel.
        case send([UInt8])
        /// The handshake is complete: stop advertising.
        case handshakeComplete
        /// A CTAP2 request (command byte ‖ CBOR) to answer with ``encryptResponse(_:)``.
        case request([UInt8])
        /// The client ended the transaction; close the tunnel.
        case shutdown
    }

    /// The phone's long-term linking identity, used when the QR code says the client can link.
    public struct LinkingIdentity: Sendable {
        /// The phone's identity key.
        public var identityKey: P256.KeyAgreement.PrivateKey
        /// The contact ID the client will use for `/cable/contact`.
        public var contactID: [UInt8]
        /// The pairing ID (8 bytes).
        public var pairingID: [UInt8]
        /// The link secret (32 bytes).
        public var linkSecret: [UInt8]
        /// The phone's display name.
        public var name: String

        /// Creates a linking identity.
        public init(identityKey: P256.KeyAgreement.PrivateKey, contactID: [UInt8], pairingID: [UInt8], linkSecret: [UInt8], name: String) {
            self.identityKey = identityKey
            self.contactID = contactID
            self.pairingID = pairingID
            self.linkSecret = linkSecret
            self.name = name
        }
    }

    private enum State: Sendable {
        /// Waiting for the driver to create the tunnel.
        case creatingTunnel
        /// Advertising; waiting for handshake message 1.
        case waitingForHandshake(psk: [UInt8])
        /// Handshake done; waiting for requests.
        case established(AuthenticatorChannel)
        /// Shutdown received or a fatal error seen.
        case closed
    }

    /// The scanned QR code.
    public let qrPayload: QRPayload
    /// Values derived from the QR secret (EID key, tunnel ID).
    package let keys: QRSecretKeys
    /// The tunnel-server domain this phone uses (carried in the advert).
    public let domain: TunnelDomainID
    private let clientIdentity: P256.KeyAgreement.PublicKey
    private let getInfo: [UInt8]
    private let linking: LinkingIdentity?
    private let random: RandomSource
    private let handshakeEphemeralKey: P256.KeyAgreement.PrivateKey?
    private var state: State = .creatingTunnel
    /// Called once with the session's traffic keys when the handshake completes, for a key log
    /// (`--keylog`); `nil` (the default) logs nothing. The session itself does no I/O.
    public var keyLog: (@Sendable (SessionKeys) -> Void)? = nil

    /// Prepares to answer a scanned QR code.
    /// - Parameters:
    ///   - qr: the scanned QR code's payload.
    ///   - getInfo: the authenticator's getInfo response CBOR for the post-handshake message.
    ///   - domain: the tunnel domain to advertise (the simulator maps every valid one to its relay).
    ///   - linking: sent (signed) in the update message only if the QR code says the client supports linking.
    ///   - random: the source of the advert nonce, the Noise ephemeral key and the padding.
    ///   - handshakeEphemeralKey: fixes the Noise ephemeral key (vectors); otherwise drawn from `random`.
    public init(
        qr: QRPayload, getInfo: [UInt8], domain: TunnelDomainID = .google, linking: LinkingIdentity? = nil,
        random: RandomSource = .system, handshakeEphemeralKey: P256.KeyAgreement.PrivateKey? = nil
    ) throws(HybridError) {
        self.qrPayload = qr
        self.clientIdentity = try qr.publicKey
        self.keys = QRSecretKeys(qrSecret: qr.secret)
        self.domain = domain
        self.getInfo = getInfo
        self.linking = linking
        self.random = random
        self.handshakeEphemeralKey = handshakeEphemeralKey
    }

    /// Path to open on the tunnel service: `/cable/new/{TUNNEL_ID}`.
    public var newTunnelPath: String { TunnelServicePath.new(tunnelID: keys.tunnelID).path }

    /// The tunnel exists and the service assigned `routingID`: returns the 20-byte advert.
    ///
    /// - Parameters:
    ///   - routingID: the 3-byte routing ID from the service's `X-caBLE-Routing-ID`.
    ///   - nonce: fixes the 10-byte connection nonce (vectors); otherwise drawn.
    /// - Throws: ``HybridError/Code/invalidLength`` for a routing ID other than 3 bytes or a nonce
    ///   other than 10.
    public mutating func tunnelCreated(routingID: [UInt8], nonce: [UInt8]? = nil) throws(HybridError) -> [UInt8] {
        guard case .creatingTunnel = state else { preconditionFailure("tunnelCreated(routingID:) called twice") }
        guard routingID.count == HybridConstants.routingIDSize else {
            throw HybridError(.invalidLength, "routing ID is \(routingID.count) bytes, expected 3")
        }
        let nonce = nonce ?? random.bytes(HybridConstants.nonceSize)
        guard nonce.count == HybridConstants.nonceSize else {
            throw HybridError(.invalidLength, "connection nonce is \(nonce.count) bytes, expected \(HybridConstants.nonceSize)")
        }
        let eid = EID(nonce: nonce, routingID: routingID, domain: domain)
        state = .waitingForHandshake(psk: derivePSK(secret: qrPayload.secret, eidPlaintext: eid.bytes))
        return AdvertCipher(eidKey: keys.eidKey).encrypt(plaintext: eid.bytes)
    }

    /// Processes one binary tunnel message. Any error is fatal: the session closes.
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
        case .waitingForHandshake(let psk):
            let (result, response) = try NoiseHandshake.respondQR(
                to: message, psk: psk, peerIdentity: clientIdentity,
                ephemeralKey: handshakeEphemeralKey ?? random.keyAgreementKey())
            keyLog?(result.keys)
            var crypter = result.crypter
            let post = try crypter.encrypt(PostHandshakeMessage(getInfo: getInfo).encode())
            let update = try crypter.encrypt(UpdateMessage.frame(linking: linkingInfo(handshakeHash: result.handshakeHash)).bytes)
            state = .established(AuthenticatorChannel(crypter: crypter))
            return [.send(response), .handshakeComplete, .send(post), .send(update)]
        case .established(var channel):
            let action = try channel.received(message)
            state = action == .shutdown ? .closed : .established(channel)
            return action.map { [$0] } ?? []
        case .creatingTunnel:
            throw HybridError(.unexpectedMessage, "tunnel message before the tunnel was created")
        case .closed:
            throw HybridError(.unexpectedMessage, "tunnel message after the session closed")
        }
    }

    /// Encrypts the answer (status byte ‖ CBOR) to the outstanding request as a `kCTAP` frame.
    public mutating func encryptResponse(_ response: [UInt8]) throws(HybridError) -> [UInt8] {
        guard case .established(var channel) = state, channel.awaitingResponse else {
            preconditionFailure("encryptResponse(_:) without an outstanding request (state \(state))")
        }
        let ciphertext = try channel.encryptResponse(response)
        state = .established(channel)
        return ciphertext
    }

    private func linkingInfo(handshakeHash: [UInt8]) -> LinkingInfo? {
        guard qrPayload.supportsLinking == true, let linking else { return nil }
        return LinkingInfo(
            contactID: linking.contactID, pairingID: linking.pairingID, linkSecret: linking.linkSecret,
            authenticatorPublicKey: Array(linking.identityKey.publicKey.x963Representation), name: linking.name,
            handshakeSignature: LinkingInfo.handshakeSignature(
                authenticatorIdentity: linking.identityKey, clientIdentity: clientIdentity, handshakeHash: handshakeHash))
    }
}
