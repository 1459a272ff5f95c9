import CTAP2
import Crypto
import HybridCore
import HybridTestSupport
import Testing

/// The linked state machines and the client payload on their own: parsing (unknown payload keys
/// ignored, each malformed field refused with its reason), and the desktop
/// and phone sessions agreeing with each other.
@Suite struct LinkedSessionTests {
    @Test("client payload: canonical round trip; each malformed shape refused with its reason")
    func clientPayload() throws {
        let payload = ClientPayload(pairingID: Array(1...8), clientNonce: Array(repeating: 7, count: 16), requestType: .makeCredential)
        #expect(try ClientPayload(cbor: payload.cbor) == payload)
        #expect(payload.headerValue == Hex.encode(payload.cbor, uppercase: true))
        let cases: [(CBORValue, String)] = [
            ([1: .bytes(Array(1...7)), 2: .bytes(Array(repeating: 7, count: 16)), 3: "ga"], "key 1"),
            ([1: .bytes(Array(1...8)), 2: .bytes(Array(repeating: 7, count: 15)), 3: "ga"], "key 2"),
            ([1: .bytes(Array(1...8)), 2: .bytes(Array(repeating: 7, count: 16)), 3: "xx"], "key 3"),
            ([1: .bytes(Array(1...8)), 2: .bytes(Array(repeating: 7, count: 16))], "key 3"),
            (.array([]), "not a map"),
        ]
        for (value, reason) in cases {
            #expect(throws: HybridError.self) { try ClientPayload(cbor: CBOR.encode(value)) }
            do {
                _ = try ClientPayload(cbor: CBOR.encode(value))
            } catch {
                #expect(error.code == .invalidLinkingInfo)
                #expect(error.description.contains(reason), "\(error)")
            }
        }
        #expect(throws: HybridError.self) { try ClientPayload(cbor: [0xFF]) }
        // A key the phone does not know is ignored, as Chromium's phone ignores it.
        let extended = CBOR.encode([1: .bytes(Array(1...8)), 2: .bytes(Array(repeating: 7, count: 16)), 3: "mc", 4: .bool(true)])
        #expect(try ClientPayload(cbor: extended) == payload)
    }

    @Test("desktop and phone linked sessions agree; a wrong link secret means the advert is not recognised")
    func sessionsAgree() throws {
        let identity = P256.KeyAgreement.PrivateKey()
        let secret = LinkingInfo.pairedSecret(rootSecret: Array(repeating: 1, count: 32), contactID: [9, 9], pairingID: Array(1...8))
        let link = LinkedClientSession.Link(
            contactID: [9, 9], pairingID: Array(1...8), linkSecret: secret,
            authenticatorPublicKey: Array(identity.publicKey.x963Representation))
        var desktop = try LinkedClientSession(link: link, requestType: .getAssertion)
        var phone = try LinkedAuthenticatorSession(
            payload: desktop.payload, tunnelID: Array(repeating: 3, count: 16), routingID: [1, 2, 3], identityKey: identity,
            linkSecret: secret, getInfo: CBOR.encode(SoftwareAuthenticator.getInfo.cbor))
        var stranger = try LinkedAuthenticatorSession(
            payload: desktop.payload, tunnelID: Array(repeating: 3, count: 16), routingID: [1, 2, 3], identityKey: identity,
            linkSecret: Array(repeating: 0, count: 32), getInfo: CBOR.encode(SoftwareAuthenticator.getInfo.cbor))
        #expect(desktop.receivedAdvert(stranger.advert()) == .ignored)
        guard case .matched = desktop.receivedAdvert(phone.advert()) else {
            Issue.record("the phone's advert did not match")
            return
        }
        let actions = try phone.receivedMessage(desktop.startHandshake())
        #expect(actions.count == 3, "msg2, handshakeComplete, post-handshake; no update message")
        guard case .send(let message2) = actions[0], case .send(let post) = actions[2] else {
            Issue.record("unexpected \(actions)")
            return
        }
        #expect(try desktop.receivedMessage(message2) == [])
        #expect(try desktop.receivedMessage(post) == [.ready(getInfo: CBOR.encode(SoftwareAuthenticator.getInfo.cbor))])
        #expect(try phone.receivedMessage(desktop.encryptRequest([0x04])) == [.request([0x04])])
        #expect(try desktop.receivedMessage(phone.encryptResponse([0x00])) == [.response([0x00])])
        #expect(try phone.receivedMessage(desktop.encryptShutdown()) == [.shutdown])
    }

    @Test("a stored link with a malformed public key or pairing ID is refused")
    func malformedLink() {
        let good = Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)
        for link in [
            LinkedClientSession.Link(contactID: [1], pairingID: Array(1...8), linkSecret: Array(repeating: 0, count: 32), authenticatorPublicKey: [4] + Array(repeating: 0, count: 64)),
            LinkedClientSession.Link(contactID: [1], pairingID: Array(1...7), linkSecret: Array(repeating: 0, count: 32), authenticatorPublicKey: good),
            LinkedClientSession.Link(contactID: [], pairingID: Array(1...8), linkSecret: Array(repeating: 0, count: 32), authenticatorPublicKey: good),
        ] {
            #expect(throws: HybridError(.invalidLinkingInfo, "")) { _ = try LinkedClientSession(link: link, requestType: .getAssertion) }
        }
    }

    @Test("a fixed client nonce of another length than 16 bytes is an invalidLength error, not a trap")
    func wrongNonceLength() throws {
        let link = LinkedClientSession.Link(
            contactID: [1], pairingID: Array(1...8), linkSecret: Array(repeating: 0, count: 32),
            authenticatorPublicKey: Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation))
        for nonce in [[], Array(repeating: UInt8(1), count: 15), Array(repeating: 1, count: 17)] {
            let error = #expect(throws: HybridError.self) {
                _ = try LinkedClientSession(link: link, requestType: .getAssertion, clientNonce: nonce)
            }
            #expect(error?.code == .invalidLength && error?.reason == "client nonce is \(nonce.count) bytes, expected 16")
        }
        _ = try LinkedClientSession(link: link, requestType: .getAssertion, clientNonce: Array(repeating: 1, count: 16))
    }
}
