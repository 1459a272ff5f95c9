import CTAP2
import Crypto
import HybridCore
import HybridTestSupport
import Synchronization
import Testing

/// Reproduces every byte of `Vectors/transcript_qr_flow.json` by driving the two session state
/// machines against each other with the transcript's fixed keys, secret, nonce and routing ID.
@Suite struct TranscriptQRFlowTests {
    let t: TranscriptQRInputs

    init() throws {
        t = try TranscriptQRInputs.load()
    }

    @Test func noiseTraceStepByStep() throws {
        try replay(trace: t.noise.trace)
    }

    @Test func qrCodeAndDerivedValues() throws {
        let client = try makeClient()
        #expect(client.url == t.qr.url)
        #expect(Hex.encode(CBOR.encode(client.qrPayload.cbor)) == t.qr.cbor_hex)
        #expect(Hex.encode(client.keys.eidKey) == t.derived.eid_key_64)
        #expect(Hex.encode(client.keys.tunnelID) == t.derived.tunnel_id_16)
        let base = try #require(TunnelDomainID(rawValue: t.inputs.tunnel_server_domain_id).baseURL)
        #expect(base + TunnelServicePath.new(tunnelID: client.keys.tunnelID).path == t.derived.new_tunnel_url)
        #expect(Hex.encode(derivePSK(secret: hex(t.inputs.qr_secret), eidPlaintext: hex(t.advert.eid_plaintext_16))) == t.advert.psk_32)
    }

    /// The whole transaction through both state machines: every wire message byte-exact.
    @Test func bothStateMachinesReproduceEveryWireByte() throws {
        var client = try makeClient()
        let qr = try QRPayload(url: client.url)
        var phone = try AuthenticatorSession(
            qr: qr, getInfo: hex(t.post_handshake.getinfo_cbor),
            domain: TunnelDomainID(rawValue: t.inputs.tunnel_server_domain_id),
            handshakeEphemeralKey: try keyAgreementKey(t.inputs.phone_ephemeral_private_scalar))
        let base = try #require(TunnelDomainID.google.baseURL)
        #expect(base + phone.newTunnelPath == t.derived.new_tunnel_url)

        let advert = try phone.tunnelCreated(routingID: hex(t.inputs.routing_id), nonce: hex(t.inputs.eid_nonce))
        #expect(Hex.encode(advert) == t.advert.advert_20)

        guard case .matched(let eid, let connectPath) = client.receivedAdvert(advert) else {
            Issue.record("the phone's advert did not match")
            return
        }
        #expect(Hex.encode(eid.bytes) == t.advert.eid_plaintext_16)
        #expect(base + connectPath == t.derived.connect_url)
        #expect(client.receivedAdvert(advert) == .ignored, "a repeated advert is ignored")

        let msg1 = client.tunnelConnected(ephemeralKey: try keyAgreementKey(t.inputs.desktop_ephemeral_private_scalar))
        #expect(Hex.encode(msg1) == t.noise.msg1_desktop_to_phone)

        let messages = t.post_handshake.messages
        let phoneActions = try phone.receivedMessage(msg1)
        #expect(phoneActions == [
            .send(hex(t.noise.msg2_phone_to_desktop)), .handshakeComplete,
            .send(hex(messages[0].ciphertext)), .send(hex(messages[1].ciphertext)),
        ])

        #expect(try client.receivedMessage(hex(t.noise.msg2_phone_to_desktop)) == [])
        #expect(try client.receivedMessage(hex(messages[0].ciphertext)) == [.ready(getInfo: hex(t.post_handshake.getinfo_cbor))])
        #expect(try client.receivedMessage(hex(messages[1].ciphertext)) == [])
        #expect(client.isEstablished)

        let extra = t.post_handshake.getassertion_extra
        let request = [0x02] + hex(extra.request_cbor)  // authenticatorGetAssertion
        let requestCiphertext = try client.encryptRequest(request)
        #expect(Hex.encode(requestCiphertext) == messages[2].ciphertext)
        #expect(try phone.receivedMessage(requestCiphertext) == [.request(request)])

        let response = [0x00] + hex(extra.response_cbor)
        let responseCiphertext = try phone.encryptResponse(response)
        #expect(Hex.encode(responseCiphertext) == messages[3].ciphertext)
        #expect(try client.receivedMessage(responseCiphertext) == [.response(response)])

        let shutdown = try client.encryptShutdown()
        #expect(Hex.encode(shutdown) == messages[4].ciphertext)
        #expect(try phone.receivedMessage(shutdown) == [.shutdown])
    }

    /// What Docs/VECTORS.md tells an outside implementer the public API reaches: the EID key, the
    /// tunnel ID, the EID plaintext, and the handshake hash and traffic keys through `keyLog`.
    @Test func publicAccessorsReachTheDerivedValues() throws {
        var client = try makeClient()
        let logged = Mutex<[SessionKeys]>([])
        client.keyLog = { keys in logged.withLock { $0.append(keys) } }
        #expect(Hex.encode(client.eidKey) == t.derived.eid_key_64)
        var phone = try AuthenticatorSession(
            qr: QRPayload(url: client.url), getInfo: hex(t.post_handshake.getinfo_cbor),
            handshakeEphemeralKey: try keyAgreementKey(t.inputs.phone_ephemeral_private_scalar))
        phone.keyLog = { keys in logged.withLock { $0.append(keys) } }
        #expect(phone.newTunnelPath == "/cable/new/" + t.derived.tunnel_id_16.uppercased())
        let advert = try phone.tunnelCreated(routingID: hex(t.inputs.routing_id), nonce: hex(t.inputs.eid_nonce))
        guard case .matched(let eid, _) = client.receivedAdvert(advert) else {
            Issue.record("the phone's advert did not match")
            return
        }
        #expect(Hex.encode(eid.bytes) == t.advert.eid_plaintext_16)
        let msg1 = client.tunnelConnected(ephemeralKey: try keyAgreementKey(t.inputs.desktop_ephemeral_private_scalar))
        for case .send(let message) in try phone.receivedMessage(msg1) { _ = try client.receivedMessage(message) }
        let keys = logged.withLock { $0 }
        #expect(keys.count == 2 && keys[0] == keys[1], "both sides logged the same keys")
        #expect(keys.first.map { Hex.encode($0.handshakeHash) } == t.noise.handshake_hash)
        #expect(keys.first.map { Hex.encode($0.initiatorToResponder) } == t.noise.k1_desktop_write_phone_read)
        #expect(keys.first.map { Hex.encode($0.responderToInitiator) } == t.noise.k2_phone_write_desktop_read)
    }

    /// Handshake hash and traffic keys straight from the Noise layer.
    @Test func handshakeHashAndTrafficKeys() throws {
        let psk = hex(t.advert.psk_32)
        let identity = try keyAgreementKey(t.inputs.desktop_identity_private_scalar)
        #expect(Hex.encode(identity.publicKey.x963Representation) == t.inputs.desktop_identity_public_x962)
        #expect(Hex.encode(identity.publicKey.compressedRepresentation) == t.inputs.desktop_identity_public_compressed)
        let initiator = NoiseHandshake.Initiator.qr(
            psk: psk, identityKey: identity, ephemeralKey: try keyAgreementKey(t.inputs.desktop_ephemeral_private_scalar))
        let (phoneResult, response) = try NoiseHandshake.respondQR(
            to: initiator.message, psk: psk, peerIdentity: identity.publicKey,
            ephemeralKey: try keyAgreementKey(t.inputs.phone_ephemeral_private_scalar))
        #expect(Hex.encode(response) == t.noise.msg2_phone_to_desktop)
        let desktopResult = try initiator.finish(response: response)
        #expect(Hex.encode(desktopResult.handshakeHash) == t.noise.handshake_hash)
        #expect(phoneResult.handshakeHash == desktopResult.handshakeHash)

        // The transcript's k1/k2 must be the keys in use: a crypter built from them reproduces every message.
        var desktopFromVector = Crypter(readKey: hex(t.noise.k2_phone_write_desktop_read), writeKey: hex(t.noise.k1_desktop_write_phone_read))
        var desktop = desktopResult.crypter
        for message in t.post_handshake.messages where message.direction == "desktop->phone" {
            #expect(Crypter.pad(hex(message.plaintext)) == hex(message.padded_plaintext))
            #expect(Crypter.nonceBytes(message.sequence_number) == hex(message.aes_gcm_nonce))
            let a = try desktop.encrypt(hex(message.plaintext))
            let b = try desktopFromVector.encrypt(hex(message.plaintext))
            #expect(Hex.encode(a) == message.ciphertext, "\(message.label)")
            #expect(a == b)
        }
        var phone = phoneResult.crypter
        for message in t.post_handshake.messages where message.direction == "phone->desktop" {
            #expect(Hex.encode(try phone.encrypt(hex(message.plaintext))) == message.ciphertext, "\(message.label)")
            #expect(Hex.encode(try desktopFromVector.decrypt(hex(message.ciphertext))) == message.plaintext)
        }
    }

    @Test func clientDataHash() throws {
        let extra = t.post_handshake.getassertion_extra
        #expect(Hex.encode(SHA256.hash(data: Array(extra.client_data_json_utf8.utf8))) == extra.client_data_hash)
    }

    private func makeClient() throws -> ClientSession {
        ClientSession(
            requestType: QRPayload.RequestType(rawValue: t.inputs.request_type_hint) ?? .getAssertion,
            timestamp: t.inputs.qr_timestamp, supportsLinking: true,
            identityKey: try keyAgreementKey(t.inputs.desktop_identity_private_scalar),
            qrSecret: hex(t.inputs.qr_secret))
    }
}
