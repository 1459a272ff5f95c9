import CTAP2
import Crypto
import HybridCore
import HybridRuntime
import HybridTestSupport
import Synchronization
import Testing

/// `Vectors/transcript_linked_flow.json` reproduced byte for byte through the runtime: the session
/// drivers over an in-memory tunnel, with the transcript's fixed keys injected (not only the pure
/// state machines, which `TranscriptLinkedFlowTests` covers).
@Suite("Linked transcript through the drivers", .timeLimit(.minutes(1)))
struct LinkedTranscriptRuntimeTests {
    let t: LinkedTranscriptInputs
    let qr: TranscriptQRInputs

    init() throws {
        t = try LinkedTranscriptInputs.load()
        qr = try TranscriptQRInputs.load()
    }

    @Test("Part B: contact header, paths, advert, NKpsk0 messages and post-handshake ciphertext, through the linked drivers")
    func linkedTransactionThroughDrivers() async throws {
        let i = t.inputs
        let link = LinkedClientSession.Link(
            contactID: hex(i.contact_id), pairingID: hex(i.pairing_id_8), linkSecret: hex(i.paired_secret),
            authenticatorPublicKey: hex(i.phone_identity_public_x962))
        let desktop = try LinkedClientSession(
            link: link, requestType: .getAssertion, random: .exhausted, clientNonce: hex(i.client_nonce_16),
            handshakeEphemeralKey: try scalarKey(i.desktop_ephemeral_private_scalar))
        #expect(desktop.payload.headerValue == t.derived.X_caBLE_Client_Payload_header_value)
        #expect("wss://cable.ua5v.com" + desktop.contactPath == t.derived.contact_url)

        // What the relay would push: the transcript's tunnel and routing IDs and the desktop's payload.
        let push = PushMessage(
            tunnelID: hex(i.tunnel_id_from_service), routingID: hex(i.routing_id_from_service),
            clientPayload: desktop.payload.cbor)
        #expect(Hex.encode(push.clientPayload) == t.derived.client_payload_cbor)
        #expect(try PushMessage(bytes: push.encoded) == push)
        let postPlaintext = hex(try #require(t.post_handshake.messages.first).plaintext)
        let getInfo = try #require(try PostHandshakeMessage.parse(postPlaintext).getInfo)
        let phone = try LinkedAuthenticatorSession(
            payload: try ClientPayload(cbor: push.clientPayload), tunnelID: push.tunnelID, routingID: push.routingID,
            identityKey: try scalarKey(i.phone_identity_private_scalar), linkSecret: hex(i.paired_secret), getInfo: getInfo,
            random: .exhausted, eidPlaintext: hex(i.eid_plaintext_16),
            handshakeEphemeralKey: try scalarKey(i.phone_ephemeral_private_scalar))
        #expect("wss://cable.ua5v.com" + phone.connectPath == t.derived.phone_connect_url)

        let desktopSent = Recorder(), phoneSent = Recorder(), adverts = Recorder()
        let request: [UInt8] = [0x04]
        let outcome = try await HybridHarness.runLinkedInMemory(
            desktop: desktop, phone: phone, request: request,
            wrapDesktop: { RecordingTunnel($0, sent: desktopSent) }, wrapPhone: { RecordingTunnel($0, sent: phoneSent) },
            adverts: { adverts.append($0) }
        ) { received in
            #expect(received == request)
            return [0x00, 0xA0]
        }
        #expect(outcome.response == [0x00, 0xA0])
        #expect(outcome.getInfo == getInfo)
        #expect(outcome.linking == nil)
        #expect(adverts.messages.map { Hex.encode($0) } == [t.derived.advert_20])
        #expect(Hex.encode(try #require(desktopSent.messages.first)) == t.noise.msg1_desktop_to_phone)
        let fromPhone = phoneSent.messages
        #expect(fromPhone.count == 3, "msg2, post-handshake, response: no update message in a linked session")
        #expect(Hex.encode(fromPhone[0]) == t.noise.msg2_phone_to_desktop)
        #expect(Hex.encode(fromPhone[1]) == t.post_handshake.messages[0].ciphertext)
    }

    @Test("Part A: the QR drivers with a linking identity send the transcript's 528-byte update; the desktop verifies it")
    func linkingUpdateThroughQRDrivers() async throws {
        let a = t.linking_info_in_qr_flow
        let q = qr.inputs
        let session = ClientSession(
            requestType: .getAssertion, timestamp: q.qr_timestamp, supportsLinking: true,
            random: .scripted([hex(q.desktop_ephemeral_private_scalar)]),
            identityKey: try scalarKey(q.desktop_identity_private_scalar), qrSecret: hex(q.qr_secret))
        let linking = AuthenticatorSession.LinkingIdentity(
            identityKey: try scalarKey(a.phone_identity_private_scalar), contactID: hex(a.contact_id),
            pairingID: hex(a.pairing_id_8), linkSecret: hex(a.paired_secret), name: a.authenticator_name)
        let phoneSession = try AuthenticatorSession(
            qr: QRPayload(url: session.url), getInfo: CBOR.encode(SoftwareAuthenticator.getInfo.cbor), linking: linking, random: .scripted([hex(q.eid_nonce)]),
            handshakeEphemeralKey: try scalarKey(q.phone_ephemeral_private_scalar))

        // Wired by hand, not through HybridHarness.transactInMemory: both sessions here are scripted
        // (the transcript's randomness, ephemeral keys and linking secret) and the phone's sends are
        // recorded.
        let (phoneEnd, desktopEnd) = InMemoryTunnel.pair()
        let phoneSent = Recorder()
        let (adverts, sink) = AsyncStream.makeStream(of: [UInt8].self)
        let phoneTransports = AuthenticatorDriver.Transports(
            createTunnel: { _, _ in (RecordingTunnel(phoneEnd, sent: phoneSent), hex(q.routing_id)) },
            advertise: { advert in
                sink.yield(advert)
                return StreamAdvertisement(sink: sink)
            })
        let desktopTransports = ClientDriver.Transports(
            nextAdvert: { timeout in (try await nextElement(of: adverts, timeout: timeout), -45, 0) },
            connect: { _, _, _ in desktopEnd })
        async let phoneDone: Result<Void, any Error> = Result {
            try await AuthenticatorDriver.run(session: phoneSession, transports: phoneTransports, timeouts: .fast) { _ in [0x00] }
        }
        let outcome = try await ClientDriver.run(session: session, request: [0x04], transports: desktopTransports, timeouts: .fast)
        try await phoneDone.get()
        #expect(phoneSent.messages.count == 4)
        #expect(phoneSent.batches == [3, 1], "message 2, post-handshake and update in one write, then the response")
        #expect(Hex.encode(phoneSent.messages[2]) == a.ciphertext_seq1_with_k2)
        #expect(phoneSent.messages[2].count == 528)
        #expect(outcome.linking == (try LinkingInfo(cbor: CBOR.decode(hex(a.linking_map_cbor)))))
    }

    private func scalarKey(_ scalarHex: String) throws -> P256.KeyAgreement.PrivateKey {
        try P256.KeyAgreement.PrivateKey(rawRepresentation: hex(scalarHex))
    }
}

/// Messages in order, and how many went in each write, from any thread.
final class Recorder: Sendable {
    private let list = Mutex<(messages: [[UInt8]], batches: [Int])>(([], []))
    var messages: [[UInt8]] { list.withLock { $0.messages } }
    /// The number of messages of each send: 1 for `send(_:)`, the batch's size for `send(contentsOf:)`.
    var batches: [Int] { list.withLock { $0.batches } }
    func append(_ message: [UInt8]) { append(batch: [message]) }
    func append(batch: [[UInt8]]) {
        list.withLock {
            $0.messages += batch
            $0.batches.append(batch.count)
        }
    }
}

/// Records every message sent through `inner`.
struct RecordingTunnel: TunnelTransport {
    let inner: any TunnelTransport
    let sent: Recorder

    init(_ inner: any TunnelTransport, sent: Recorder) {
        self.inner = inner
        self.sent = sent
    }

    func send(_ message: [UInt8]) async throws {
        sent.append(message)
        try await inner.send(message)
    }

    func send(contentsOf messages: [[UInt8]]) async throws {
        sent.append(batch: messages)
        try await inner.send(contentsOf: messages)
    }

    func receive(timeout: Duration) async throws -> [UInt8] { try await inner.receive(timeout: timeout) }
    func receiveIfReady() -> [UInt8]? { inner.receiveIfReady() }
    func close(code: WebSocketCloseCode, reason: String) async { await inner.close(code: code, reason: reason) }
}

extension RandomSource {
    /// Hands out `values` in order (each exactly as long as asked for), then fails the test.
    static func scripted(_ values: [[UInt8]]) -> RandomSource {
        let queue = Mutex(values)
        return RandomSource { count in
            let next = queue.withLock { $0.isEmpty ? nil : $0.removeFirst() }
            guard let next, next.count == count else {
                Issue.record("unexpected random draw of \(count) bytes")
                return [UInt8](repeating: 0x01, count: count)
            }
            return next
        }
    }

    /// Any draw fails the test: everything random must have been injected.
    static var exhausted: RandomSource { scripted([]) }
}
