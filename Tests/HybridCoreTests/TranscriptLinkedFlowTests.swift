import CTAP2
import Crypto
import HybridCore
import HybridTestSupport
import Synchronization
import Testing

/// Reproduces `Vectors/transcript_linked_flow.json`: the linking information a phone sends at the
/// end of the QR flow (Part A), and a later linked transaction with `Noise_NKpsk0` (Part B).
@Suite struct TranscriptLinkedFlowTests {
    let t: LinkedTranscriptInputs
    let qr: TranscriptQRInputs

    init() throws {
        t = try LinkedTranscriptInputs.load()
        qr = try TranscriptQRInputs.load()
    }

    // MARK: - Part A: linking information in the QR flow

    @Test func pairedSecretDerivation() {
        let a = t.linking_info_in_qr_flow
        let perContact = derive(secret: hex(a.phone_root_secret), salt: hex(a.contact_id), type: .perContactIDSecret, count: 32)
        #expect(Hex.encode(perContact) == a.per_contact_id_secret)
        #expect(Hex.encode(derive(secret: perContact, salt: hex(a.pairing_id_8), type: .pairedSecret, count: 32)) == a.paired_secret)
    }

    @Test func linkingMapAndSignature() throws {
        let a = t.linking_info_in_qr_flow
        let phoneIdentity = try keyAgreementKey(a.phone_identity_private_scalar)
        let desktopIdentity = try keyAgreementKey(qr.inputs.desktop_identity_private_scalar)
        let signature = LinkingInfo.handshakeSignature(
            authenticatorIdentity: phoneIdentity, clientIdentity: desktopIdentity.publicKey, handshakeHash: hex(a.handshake_hash))
        #expect(Hex.encode(signature) == a.pairing_signature)
        let info = try LinkingInfo(cbor: CBOR.decode(hex(a.linking_map_cbor)))
        #expect(Hex.encode(CBOR.encode(info.cbor)) == a.linking_map_cbor)
        #expect(info.name == a.authenticator_name)
        try info.verify(clientIdentity: desktopIdentity, handshakeHash: hex(a.handshake_hash))
        #expect(Hex.encode(UpdateMessage.frame(linking: info).bytes) == a.update_plaintext)
    }

    /// The phone state machine, given a linking identity and a QR code that allows linking, sends the
    /// transcript's update ciphertext, and the desktop state machine verifies and surfaces it.
    @Test func updateMessageThroughBothStateMachines() throws {
        let a = t.linking_info_in_qr_flow
        var client = ClientSession(
            requestType: .getAssertion, timestamp: qr.inputs.qr_timestamp, supportsLinking: true,
            identityKey: try keyAgreementKey(qr.inputs.desktop_identity_private_scalar), qrSecret: hex(qr.inputs.qr_secret))
        let linking = AuthenticatorSession.LinkingIdentity(
            identityKey: try keyAgreementKey(a.phone_identity_private_scalar), contactID: hex(a.contact_id),
            pairingID: hex(a.pairing_id_8), linkSecret: hex(a.paired_secret), name: a.authenticator_name)
        var phone = try AuthenticatorSession(
            qr: QRPayload(url: client.url), getInfo: CBOR.encode(SoftwareAuthenticator.getInfo.cbor), linking: linking,
            handshakeEphemeralKey: try keyAgreementKey(qr.inputs.phone_ephemeral_private_scalar))
        let advert = try phone.tunnelCreated(routingID: hex(qr.inputs.routing_id), nonce: hex(qr.inputs.eid_nonce))
        _ = client.receivedAdvert(advert)
        let msg1 = client.tunnelConnected(ephemeralKey: try keyAgreementKey(qr.inputs.desktop_ephemeral_private_scalar))
        let actions = try phone.receivedMessage(msg1)
        #expect(actions.count == 4)
        guard case .send(let update) = actions.last else {
            Issue.record("no update message")
            return
        }
        #expect(Hex.encode(update) == a.ciphertext_seq1_with_k2)
        guard case .send(let response) = actions[0], case .send(let post) = actions[2] else {
            Issue.record("unexpected actions \(actions)")
            return
        }
        _ = try client.receivedMessage(response)
        _ = try client.receivedMessage(post)
        let linked = try client.receivedMessage(update)
        #expect(linked == [.linked(try LinkingInfo(cbor: CBOR.decode(hex(a.linking_map_cbor))))])
    }

    // MARK: - Part B: the linked transaction

    @Test func contactRequestValues() {
        let i = t.inputs
        #expect(Hex.encode(CBOR.encode([1: .bytes(hex(i.pairing_id_8)), 2: .bytes(hex(i.client_nonce_16)), 3: "ga"])) == t.derived.client_payload_cbor)
        #expect(ClientPayload(pairingID: hex(i.pairing_id_8), clientNonce: hex(i.client_nonce_16), requestType: .getAssertion).headerValue
            == t.derived.X_caBLE_Client_Payload_header_value)
        #expect("wss://cable.ua5v.com" + TunnelServicePath.contact(contactID: hex(i.contact_id)).path == t.derived.contact_url)
        #expect("wss://cable.ua5v.com" + TunnelServicePath.connect(routingID: hex(i.routing_id_from_service), tunnelID: hex(i.tunnel_id_from_service)).path
            == t.derived.phone_connect_url)
    }

    @Test func advertAndPSK() {
        let i = t.inputs
        let eidKey = derive(secret: hex(i.paired_secret), salt: hex(i.client_nonce_16), type: .eidKey, count: 64)
        #expect(Hex.encode(eidKey) == t.derived.eid_key)
        let advert = AdvertCipher(eidKey: eidKey).encrypt(plaintext: hex(i.eid_plaintext_16))
        #expect(Hex.encode(advert) == t.derived.advert_20)
        #expect(Hex.encode(derivePSK(secret: hex(i.paired_secret), eidPlaintext: hex(i.eid_plaintext_16))) == t.derived.psk)
    }

    @Test func noiseTraceStepByStep() throws {
        try replay(trace: t.noise.trace)
    }

    @Test func nkHandshakeAndPostHandshakeMessage() throws {
        let i = t.inputs
        let phoneIdentity = try keyAgreementKey(i.phone_identity_private_scalar)
        let initiator = NoiseHandshake.Initiator.linked(
            psk: hex(t.derived.psk), peerIdentity: phoneIdentity.publicKey,
            ephemeralKey: try keyAgreementKey(i.desktop_ephemeral_private_scalar))
        #expect(Hex.encode(initiator.message) == t.noise.msg1_desktop_to_phone)
        let (phoneResult, response) = try NoiseHandshake.respondLinked(
            to: initiator.message, psk: hex(t.derived.psk), identityKey: phoneIdentity,
            ephemeralKey: try keyAgreementKey(i.phone_ephemeral_private_scalar))
        #expect(Hex.encode(response) == t.noise.msg2_phone_to_desktop)
        let desktopResult = try initiator.finish(response: response)
        #expect(Hex.encode(desktopResult.handshakeHash) == t.noise.handshake_hash)
        #expect(Hex.encode(phoneResult.handshakeHash) == t.noise.handshake_hash)

        let message = try #require(t.post_handshake.messages.first)
        var phone = phoneResult.crypter
        #expect(Hex.encode(try phone.encrypt(hex(message.plaintext))) == message.ciphertext)
        var desktop = desktopResult.crypter
        #expect(Hex.encode(try desktop.decrypt(hex(message.ciphertext))) == message.plaintext)
        var fromVector = Crypter(readKey: hex(t.noise.k2_phone_write_desktop_read), writeKey: hex(t.noise.k1_desktop_write_phone_read))
        #expect(Hex.encode(try fromVector.decrypt(hex(message.ciphertext))) == message.plaintext)
    }

    /// What Docs/VECTORS.md tells an outside implementer the public API reaches in the linked flow:
    /// the paired secret, the EID key, and the handshake hash and traffic keys through `keyLog`.
    @Test func publicAccessorsReachTheDerivedValues() throws {
        let a = t.linking_info_in_qr_flow, i = t.inputs
        #expect(Hex.encode(LinkingInfo.pairedSecret(
            rootSecret: hex(a.phone_root_secret), contactID: hex(a.contact_id), pairingID: hex(a.pairing_id_8))) == a.paired_secret)
        let phoneIdentity = try keyAgreementKey(i.phone_identity_private_scalar)
        let link = LinkedClientSession.Link(
            contactID: hex(i.contact_id), pairingID: hex(i.pairing_id_8), linkSecret: hex(i.paired_secret),
            authenticatorPublicKey: Array(phoneIdentity.publicKey.x963Representation))
        var desktop = try LinkedClientSession(
            link: link, requestType: .getAssertion, clientNonce: hex(i.client_nonce_16),
            handshakeEphemeralKey: try keyAgreementKey(i.desktop_ephemeral_private_scalar))
        #expect(Hex.encode(desktop.eidKey) == t.derived.eid_key)
        let logged = Mutex<[SessionKeys]>([])
        desktop.keyLog = { keys in logged.withLock { $0.append(keys) } }
        var phone = try LinkedAuthenticatorSession(
            payload: desktop.payload, tunnelID: hex(i.tunnel_id_from_service), routingID: hex(i.routing_id_from_service),
            identityKey: phoneIdentity, linkSecret: hex(i.paired_secret), getInfo: CBOR.encode(SoftwareAuthenticator.getInfo.cbor),
            eidPlaintext: hex(i.eid_plaintext_16), handshakeEphemeralKey: try keyAgreementKey(i.phone_ephemeral_private_scalar))
        phone.keyLog = { keys in logged.withLock { $0.append(keys) } }
        guard case .matched = desktop.receivedAdvert(phone.advert()) else {
            Issue.record("the phone's advert did not match")
            return
        }
        for case .send(let message) in try phone.receivedMessage(desktop.startHandshake()) { _ = try desktop.receivedMessage(message) }
        let keys = logged.withLock { $0 }
        #expect(keys.count == 2 && keys[0] == keys[1], "both sides logged the same keys")
        #expect(keys.first.map { Hex.encode($0.handshakeHash) } == t.noise.handshake_hash)
        #expect(keys.first.map { Hex.encode($0.initiatorToResponder) } == t.noise.k1_desktop_write_phone_read)
        #expect(keys.first.map { Hex.encode($0.responderToInitiator) } == t.noise.k2_phone_write_desktop_read)
    }
}
