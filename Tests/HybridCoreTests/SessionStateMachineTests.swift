import CTAP2
import Crypto
import HybridCore
import HybridTestSupport
import Synchronization
import Testing

/// The desktop and phone state machines driven against each other in memory, with no I/O: a
/// makeCredential, then a getAssertion whose signature verifies against the registered key.
@Suite struct SessionStateMachineTests {
    /// Runs one QR transaction between the two machines and returns the CTAP2 response bytes.
    static func transact(
        _ request: [UInt8], hint: QRPayload.RequestType, authenticator: inout SoftwareAuthenticator,
        policy: SoftwareAuthenticator.Policy = .init(), random: RandomSource
    ) throws -> [UInt8] {
        var client = ClientSession(requestType: hint, timestamp: 1_700_000_000, random: random)
        var phone = try AuthenticatorSession(
            qr: QRPayload(url: client.url), getInfo: CBOR.encode(SoftwareAuthenticator.getInfo.cbor), random: random)
        let advert = try phone.tunnelCreated(routingID: [0x2A, 0, 0])
        guard case .matched = client.receivedAdvert(advert) else {
            Issue.record("advert did not match")
            return []
        }
        var toPhone = [client.tunnelConnected()]
        var toDesktop: [[UInt8]] = []
        var response: [UInt8]? = nil
        var finished = false
        while !finished {
            for message in toPhone {
                for action in try phone.receivedMessage(message) {
                    switch action {
                    case .send(let bytes): toDesktop.append(bytes)
                    case .handshakeComplete: break
                    case .request(let bytes):
                        let answer = authenticator.handle(bytes, policy: policy, now: 1_700_000_000)
                        toDesktop.append(try phone.encryptResponse(answer.response))
                    case .shutdown: finished = true
                    }
                }
            }
            toPhone = []
            for message in toDesktop {
                for action in try client.receivedMessage(message) {
                    switch action {
                    case .ready: toPhone.append(try client.encryptRequest(request))
                    case .linked: Issue.record("no linking expected")
                    case .response(let bytes):
                        response = bytes
                        toPhone.append(try client.encryptShutdown())
                    }
                }
            }
            toDesktop = []
            if toPhone.isEmpty && !finished {
                Issue.record("the conversation stalled")
                break
            }
        }
        return try #require(response)
    }

    /// A phone that sends linking information although the QR code did not offer linking (key 4
    /// false): the desktop ignores it unread, valid or not, as Chromium's desktop does; offered, it
    /// is checked and a malformed one (a 7-byte pairing ID) fails the transaction.
    @Test("linking information the desktop did not offer is ignored, even a malformed one", arguments: [false, true])
    func unofferedLinkingIgnored(malformed: Bool) throws {
        for offered in [false, true] {
            let random = RandomSource.deterministic(seed: Array("unoffered linking \(malformed) \(offered)".utf8))
            var client = ClientSession(requestType: .getAssertion, timestamp: 1_700_000_000, supportsLinking: offered, random: random)
            var qr = try QRPayload(url: client.url)
            qr.supportsLinking = true  // the phone links whatever the desktop said
            let identity = AuthenticatorSession.LinkingIdentity(
                identityKey: random.keyAgreementKey(), contactID: random.bytes(40), pairingID: random.bytes(malformed ? 7 : 8),
                linkSecret: random.bytes(32), name: "Pixel")
            var phone = try AuthenticatorSession(
                qr: qr, getInfo: CBOR.encode(SoftwareAuthenticator.getInfo.cbor), linking: identity, random: random)
            guard case .matched = client.receivedAdvert(try phone.tunnelCreated(routingID: [0x2A, 0, 0])) else {
                Issue.record("advert did not match")
                return
            }
            var toDesktop: [[UInt8]] = []
            for action in try phone.receivedMessage(client.tunnelConnected()) {
                if case .send(let bytes) = action { toDesktop.append(bytes) }
            }
            #expect(toDesktop.count == 3, "handshake answer, post-handshake and update messages")
            let linked = Self.linkingRead(offered: offered, malformed: malformed) {
                () throws(HybridError) -> [ClientSession.Action] in
                var actions: [ClientSession.Action] = []
                for message in toDesktop { actions += try client.receivedMessage(message) }
                return actions
            }
            if let linked { #expect(linked.count == (offered ? 1 : 0)) }
        }
    }

    /// What the desktop made of a phone's linking map, received by `receive`: a malformed one fails
    /// (`invalidLinkingInfo`, then `nil`) only when linking was offered; otherwise the session is
    /// ready and the linking information read is returned (none when not offered).
    static func linkingRead(
        offered: Bool, malformed: Bool, _ receive: () throws(HybridError) -> [ClientSession.Action]
    ) -> [LinkingInfo]? {
        let actions: [ClientSession.Action]
        do {
            actions = try receive()
        } catch {
            #expect(offered && malformed, "only offered linking is read: \(error)")
            #expect(error.code == .invalidLinkingInfo)
            return nil
        }
        #expect(!(offered && malformed), "malformed offered linking must fail")
        #expect(actions.contains { if case .ready = $0 { true } else { false } })
        let linked = actions.compactMap { action -> LinkingInfo? in if case .linked(let info) = action { info } else { nil } }
        #expect(linked.isEmpty == !offered, "offered \(offered), malformed \(malformed): \(actions)")
        return linked
    }

    /// Older phones put the linking map in the post-handshake message (key 2) instead of an update
    /// message. Read and verified when the QR code offered linking; ignored unread when it did not,
    /// as for an update message (``unofferedLinkingIgnored(malformed:)``).
    @Test("linking information in the post-handshake message: verified when offered, ignored unread when not", arguments: [false, true])
    func postHandshakeLinking(malformed: Bool) throws {
        for offered in [false, true] {
            let random = RandomSource.deterministic(seed: Array("post-handshake linking \(malformed) \(offered)".utf8))
            var client = ClientSession(requestType: .getAssertion, timestamp: 1_700_000_000, supportsLinking: offered, random: random)
            let qr = try QRPayload(url: client.url)
            var phone = try AuthenticatorSession(qr: qr, getInfo: CBOR.encode(SoftwareAuthenticator.getInfo.cbor), random: random)
            let logged = Mutex<SessionKeys?>(nil)
            phone.keyLog = { keys in logged.withLock { $0 = keys } }
            guard case .matched = client.receivedAdvert(try phone.tunnelCreated(routingID: [0x2A, 0, 0])) else {
                Issue.record("advert did not match")
                return
            }
            let sent = try phone.receivedMessage(client.tunnelConnected()).compactMap { action -> [UInt8]? in
                if case .send(let bytes) = action { bytes } else { nil }
            }
            let keys = try #require(logged.withLock { $0 })
            // The handshake answer as the phone sent it; then, in place of its own post-handshake and
            // update messages, a post-handshake message that carries the linking map.
            let identity = random.keyAgreementKey()
            let linking = LinkingInfo(
                contactID: random.bytes(40), pairingID: random.bytes(malformed ? 7 : 8), linkSecret: random.bytes(32),
                authenticatorPublicKey: Array(identity.publicKey.x963Representation), name: "Older phone",
                handshakeSignature: LinkingInfo.handshakeSignature(
                    authenticatorIdentity: identity, clientIdentity: try qr.publicKey, handshakeHash: keys.handshakeHash))
            var crypter = Crypter(readKey: keys.initiatorToResponder, writeKey: keys.responderToInitiator)
            let post = try crypter.encrypt(
                PostHandshakeMessage(getInfo: CBOR.encode(SoftwareAuthenticator.getInfo.cbor), linking: linking.cbor).encode())
            _ = try client.receivedMessage(sent[0])
            let received = Self.linkingRead(offered: offered, malformed: malformed) { () throws(HybridError) in
                try client.receivedMessage(post)
            }
            if let received { #expect(received == (offered ? [linking] : [])) }
        }
    }

    @Test func registrationThenSignIn() throws {
        let random = RandomSource.deterministic(seed: Array("state machines".utf8))
        var authenticator = SoftwareAuthenticator(random: random)

        let createData = CollectedClientData(type: .create, challenge: random.bytes(32), origin: "https://example.com")
        let makeCredential = MakeCredentialRequest(
            clientDataHash: createData.hash, rp: PublicKeyCredentialRpEntity(id: "example.com", name: "Example"),
            user: PublicKeyCredentialUserEntity(id: [1, 2, 3, 4], name: "alice", displayName: "Alice"),
            pubKeyCredParams: [PublicKeyCredentialParameters(alg: .es256)], options: AuthenticatorOptions(rk: true))
        let registration = try Self.transact(
            CTAP2Request.makeCredential(makeCredential).encode(), hint: .makeCredential,
            authenticator: &authenticator, policy: .init(attestation: .packedSelf), random: random)
        let created = try CTAP2Response(bytes: registration)
        #expect(created.status == .ok)
        let credential = try created.decodePayload(as: MakeCredentialResponse.self)
        #expect(try credential.verifyAttestation(clientDataHash: createData.hash) == .selfAttestation)
        let attested = try #require(credential.authData.attestedCredentialData)
        let publicKey = try attested.coseKey()

        let getData = CollectedClientData(type: .get, challenge: random.bytes(32), origin: "https://example.com")
        let getAssertion = GetAssertionRequest(rpId: "example.com", clientDataHash: getData.hash)
        let assertion = try CTAP2Response(bytes: Self.transact(
            CTAP2Request.getAssertion(getAssertion).encode(), hint: .getAssertion, authenticator: &authenticator, random: random))
        #expect(assertion.status == .ok)
        let signed = try assertion.decodePayload(as: GetAssertionResponse.self)
        #expect(signed.credential?.id == attested.credentialId)
        #expect(signed.authData.signCount == 1)
        #expect(signed.user?.name == "alice")
        try signed.verifySignature(clientDataHash: getData.hash, publicKey: publicKey)
        // The same signature must not verify for another challenge.
        let otherData = CollectedClientData(type: .get, challenge: random.bytes(32), origin: "https://example.com")
        #expect(throws: CTAP2Error.self) { try signed.verifySignature(clientDataHash: otherData.hash, publicKey: publicKey) }
    }

    @Test func deniedRequestIsAnErrorStatusNotAFailure() throws {
        let random = RandomSource.deterministic(seed: Array("deny".utf8))
        var authenticator = SoftwareAuthenticator(random: random)
        let request = GetAssertionRequest(rpId: "example.com", clientDataHash: [UInt8](repeating: 7, count: 32))
        let response = try CTAP2Response(bytes: Self.transact(
            CTAP2Request.getAssertion(request).encode(), hint: .getAssertion, authenticator: &authenticator, random: random))
        #expect(response.status == .noCredentials)
    }

    @Test func sameSeedSameTranscript() throws {
        func run() throws -> [UInt8] {
            let random = RandomSource.deterministic(seed: [42])
            var client = ClientSession(requestType: .getAssertion, timestamp: 1, random: random)
            var phone = try AuthenticatorSession(qr: QRPayload(url: client.url), getInfo: CBOR.encode(SoftwareAuthenticator.getInfo.cbor), random: random)
            let advert = try phone.tunnelCreated(routingID: [1, 2, 3])
            _ = client.receivedAdvert(advert)
            let message1 = client.tunnelConnected()
            let actions = try phone.receivedMessage(message1)
            return Array(client.url.utf8) + advert + message1 + actions.flatMap { action -> [UInt8] in
                if case .send(let bytes) = action { return bytes }
                return []
            }
        }
        #expect(try run() == run())
    }

    @Test("tunnelCreated: a routing ID other than 3 bytes or a fixed nonce other than 10 is an invalidLength error, not a trap")
    func tunnelCreatedChecksLengths() throws {
        let client = ClientSession(requestType: .getAssertion, timestamp: 1_700_000_000)
        let qr = try QRPayload(url: client.url)
        for (routingID, nonce, reason) in [
            ([1, 2] as [UInt8], nil as [UInt8]?, "routing ID is 2 bytes, expected 3"),
            ([1, 2, 3], Array(repeating: 0, count: 9), "connection nonce is 9 bytes, expected 10"),
            ([1, 2, 3], Array(repeating: 0, count: 11), "connection nonce is 11 bytes, expected 10"),
        ] {
            var phone = try AuthenticatorSession(qr: qr, getInfo: CBOR.encode(SoftwareAuthenticator.getInfo.cbor))
            let error = #expect(throws: HybridError.self) { _ = try phone.tunnelCreated(routingID: routingID, nonce: nonce) }
            #expect(error?.code == .invalidLength && error?.reason == reason, "\(String(describing: error))")
        }
    }

    @Test func tamperedHandshakeClosesTheSession() throws {
        var client = ClientSession(requestType: .getAssertion, timestamp: 1)
        var phone = try AuthenticatorSession(qr: QRPayload(url: client.url), getInfo: CBOR.encode(SoftwareAuthenticator.getInfo.cbor))
        _ = client.receivedAdvert(try phone.tunnelCreated(routingID: [1, 2, 3]))
        var message1 = client.tunnelConnected()
        message1[70] ^= 0x01
        #expect(throws: HybridError(.handshakeFailed)) { try phone.receivedMessage(message1) }
        #expect(throws: HybridError(.unexpectedMessage)) { try phone.receivedMessage(message1) }
    }

    @Test func advertFromAnotherSessionIsIgnored() throws {
        let client = ClientSession(requestType: .getAssertion, timestamp: 1)
        var other = ClientSession(requestType: .getAssertion, timestamp: 1)
        var phone = try AuthenticatorSession(qr: QRPayload(url: client.url), getInfo: CBOR.encode(SoftwareAuthenticator.getInfo.cbor))
        let advert = try phone.tunnelCreated(routingID: [1, 2, 3])
        #expect(other.receivedAdvert(advert) == .ignored)
    }
}
