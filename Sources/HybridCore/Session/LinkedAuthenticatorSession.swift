import CTAP2
import Crypto

/// What a session driver needs from a phone session once the tunnel is up; both the QR-initiated
/// ``AuthenticatorSession`` and the linked ``LinkedAuthenticatorSession`` provide it.
public protocol AuthenticatorTransaction: Sendable {
    /// Processes one binary tunnel message (any error is fatal).
    mutating func receivedMessage(_ message: [UInt8]) throws(HybridError) -> [AuthenticatorSession.Action]
    /// Encrypts the answer to the outstanding request.
    mutating func encryptResponse(_ response: [UInt8]) throws(HybridError) -> [UInt8]
}

extension AuthenticatorSession: AuthenticatorTransaction {}

/// The phone side of a linked (state-assisted) transaction, as a pure state machine. The tunnel
/// service told the phone a tunnel ID, a routing ID and the desktop's ``ClientPayload``; the phone
/// recomputed the link secret for the payload's pairing ID, joins `/cable/connect/…`, advertises
/// under `Derive(link secret, client nonce, 1, 64)` and answers `Noise_NKpsk0` with its identity key
/// (Chromium `v2_authenticator.cc` `TransactFromFCM`; PROTOCOL §9). No update message follows the
/// post-handshake message in this state (Chromium `kConnectedPaired`).
///
/// ```
/// init(…)              → connectPath             driver joins /cable/connect/…
/// advert()             → 20-byte advert          driver advertises it until the handshake is done
/// receivedMessage(_:)  → [.send(msg2), .handshakeComplete, .send(post-handshake)] / [.request] / [.shutdown]
/// ```
public struct LinkedAuthenticatorSession: Sendable, AuthenticatorTransaction {
    private enum State: Sendable {
        case joining
        case waitingForHandshake(psk: [UInt8])
        case established(AuthenticatorChannel)
        case closed
    }

    /// The desktop's payload, as the tunnel service relayed it.
    public let payload: ClientPayload
    /// The tunnel the service allocated (16 bytes).
    public let tunnelID: [UInt8]
    /// The routing ID the service allocated (3 bytes).
    public let routingID: [UInt8]
    /// The tunnel-server domain carried in the advert.
    public let domain: TunnelDomainID
    private let identityKey: P256.KeyAgreement.PrivateKey
    private let linkSecret: [UInt8]
    private let getInfo: [UInt8]
    private let random: RandomSource
    private let eidPlaintext: [UInt8]?
    private let handshakeEphemeralKey: P256.KeyAgreement.PrivateKey?
    private var state: State = .joining
    /// Called once with the session's traffic keys when the handshake completes, for a key log
    /// (`--keylog`); `nil` (the default) logs nothing. The session itself does no I/O.
    public var keyLog: (@Sendable (SessionKeys) -> Void)? = nil

    /// Prepares to answer a contact request.
    /// - Parameters:
    ///   - payload: the desktop's client payload, pushed by the relay.
    ///   - tunnelID: the 16-byte tunnel ID the relay pushed with it.
    ///   - routingID: the 3-byte routing ID of the relay that holds the tunnel.
    ///   - identityKey: the phone's long-term identity key (its public half went to the desktop when linking).
    ///   - linkSecret: the paired secret for `payload.pairingID` (``LinkingInfo/pairedSecret(rootSecret:contactID:pairingID:)``).
    ///   - eidPlaintext: fixes the 16-byte advert plaintext (vectors); otherwise
    ///     `EID(random nonce, routingID, domain)`.
    ///   - getInfo: the authenticator's getInfo response CBOR for the post-handshake message.
    ///   - domain: the tunnel domain the advert names.
    ///   - random: the source of the advert nonce, the Noise ephemeral key and the padding.
    ///   - handshakeEphemeralKey: fixes the Noise ephemeral key (vectors).
    /// - Throws: ``HybridError/Code/invalidLength`` for a tunnel or routing ID of the wrong size.
    public init(
        payload: ClientPayload, tunnelID: [UInt8], routingID: [UInt8], identityKey: P256.KeyAgreement.PrivateKey,
        linkSecret: [UInt8], getInfo: [UInt8], domain: TunnelDomainID = .google, random: RandomSource = .system,
        eidPlaintext: [UInt8]? = nil, handshakeEphemeralKey: P256.KeyAgreement.PrivateKey? = nil
    ) throws(HybridError) {
        guard tunnelID.count == 16 else { throw HybridError(.invalidLength, "tunnel ID is \(tunnelID.count) bytes, expected 16") }
        guard routingID.count == HybridConstants.routingIDSize else {
            throw HybridError(.invalidLength, "routing ID is \(routingID.count) bytes, expected 3")
        }
        if let eidPlaintext, eidPlaintext.count != HybridConstants.eidSize {
            throw HybridError(.invalidLength, "EID plaintext is \(eidPlaintext.count) bytes, expected 16")
        }
        self.payload = payload
        self.tunnelID = tunnelID
        self.routingID = routingID
        self.identityKey = identityKey
        self.linkSecret = linkSecret
        self.getInfo = getInfo
        self.domain = domain
        self.random = random
        self.eidPlaintext = eidPlaintext
        self.handshakeEphemeralKey = handshakeEphemeralKey
    }

    /// `/cable/connect/{routing ID}/{tunnel ID}`: where the phone joins the desktop's tunnel.
    public var connectPath: String { TunnelServicePath.connect(routingID: routingID, tunnelID: tunnelID).path }

    /// The 20-byte advert for this transaction; call once, after joining the tunnel.
    public mutating func advert() -> [UInt8] {
        guard case .joining = state else { preconditionFailure("advert() called twice") }
        let plaintext = eidPlaintext
            ?? EID(nonce: random.bytes(HybridConstants.nonceSize), routingID: routingID, domain: domain).bytes
        let eidKey = derive(secret: linkSecret, salt: payload.clientNonce, type: .eidKey, count: HybridConstants.eidKeySize)
        state = .waitingForHandshake(psk: derivePSK(secret: linkSecret, eidPlaintext: plaintext))
        return AdvertCipher(eidKey: eidKey).encrypt(plaintext: plaintext)
    }

    /// Processes one binary tunnel message. Any error is fatal: the session closes.
    public mutating func receivedMessage(_ message: [UInt8]) throws(HybridError) -> [AuthenticatorSession.Action] {
        do {
            return try process(message)
        } catch {
            state = .closed
            throw error
        }
    }

    private mutating func process(_ message: [UInt8]) throws(HybridError) -> [AuthenticatorSession.Action] {
        switch state {
        case .waitingForHandshake(let psk):
            let (result, response) = try NoiseHandshake.respondLinked(
                to: message, psk: psk, identityKey: identityKey,
                ephemeralKey: handshakeEphemeralKey ?? random.keyAgreementKey())
            keyLog?(result.keys)
            var crypter = result.crypter
            let post = try crypter.encrypt(PostHandshakeMessage(getInfo: getInfo).encode())
            state = .established(AuthenticatorChannel(crypter: crypter))
            return [.send(response), .handshakeComplete, .send(post)]
        case .established(var channel):
            let action = try channel.received(message)
            state = action == .shutdown ? .closed : .established(channel)
            return action.map { [$0] } ?? []
        case .joining:
            throw HybridError(.unexpectedMessage, "tunnel message before the advert was built")
        case .closed:
            throw HybridError(.unexpectedMessage, "tunnel message after the session closed")
        }
    }

    /// Encrypts the answer (status ‖ CBOR) to the outstanding request as a `kCTAP` frame.
    public mutating func encryptResponse(_ response: [UInt8]) throws(HybridError) -> [UInt8] {
        guard case .established(var channel) = state, channel.awaitingResponse else {
            preconditionFailure("encryptResponse(_:) without an outstanding request (state \(state))")
        }
        let ciphertext = try channel.encryptResponse(response)
        state = .established(channel)
        return ciphertext
    }
}
