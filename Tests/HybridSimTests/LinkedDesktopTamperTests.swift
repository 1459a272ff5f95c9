import CTAP2
import Crypto
import Foundation
import HybridCore
import HybridRuntime
import HybridSim
import Testing

/// `hybrid-sim desktop --link` against a phone whose linking information carries a tampered
/// signature: the ceremony fails with the specific error, and neither the relying-party store nor
/// the good link already in the links file changes (libwebauthn PR #288: an invalid linking update
/// must never evict a good link).
@Suite("Desktop --link: a tampered linking signature stores and loses nothing")
struct LinkedDesktopTamperTests {
    @Test("tampered signature: protocol error naming the signature; links.json byte-identical; RP store empty")
    func tamperedSignature() async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("hybridsim-tamper-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: home) }
        let linksPath = home + "/links.json"
        let good = StoredLink(
            LinkingInfo(
                contactID: [1, 2, 3], pairingID: Array(repeating: 8, count: 8), linkSecret: Array(repeating: 9, count: 32),
                authenticatorPublicKey: Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation), name: "Pixel",
                handshakeSignature: Array(repeating: 0, count: 32)),
            tunnelDomain: 0, linkedAt: 1)
        try LinkStore(path: linksPath, links: [good]).save()
        let before = try Data(contentsOf: URL(fileURLWithPath: linksPath))

        var desktop = DesktopConfiguration()
        desktop.environment = ["HYBRID_SIM_HOME": home]
        desktop.relay = .embedded(port: 0)
        desktop.proximityPort = 0
        desktop.timeout = .seconds(10)
        desktop.request = .makeCredential
        desktop.link = true
        let ready = AsyncStream<DesktopEndpoints>.makeStream()
        async let result: DesktopResult = DesktopProgram.run(desktop, output: .discarding) { endpoints in
            ready.continuation.yield(endpoints)
            ready.continuation.finish()
        }
        var endpoints: DesktopEndpoints?
        for await value in ready.stream { endpoints = value }
        let reached = try #require(endpoints)
        try await Self.tamperingPhone(url: reached.url, relayURL: reached.relayURL, proximityURL: reached.proximityURL)
        do {
            _ = try await result
            Issue.record("the desktop accepted a tampered linking signature")
        } catch let error as ProgramFailure {
            #expect(error.kind == .protocolError)
            #expect(error.message.contains("handshake signature does not verify"), "\(error.message)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: linksPath)) == before)
        #expect(try RelyingPartyStore.load(path: home + "/rp-credentials.json").credentials.isEmpty)
    }

    /// A phone built from the protocol pieces: a correct QR handshake and post-handshake message, then
    /// an update whose linking signature has one bit flipped.
    static func tamperingPhone(url: String, relayURL: String, proximityURL: String) async throws {
        let qr = try QRPayload(url: url)
        let keys = QRSecretKeys(qrSecret: qr.secret)
        let tunnel = try await WebSocketTunnel.open(url: relayURL + TunnelServicePath.new(tunnelID: keys.tunnelID).path)
        let eid = EID(nonce: RandomSource.system.bytes(10), routingID: try #require(tunnel.routingID), domain: .google)
        let advertiser = try ProximityAdvertiser(
            advert: AdvertCipher(eidKey: keys.eidKey).encrypt(plaintext: eid.bytes),
            configuration: .init(target: try ProximityEndpoint(parsing: proximityURL)))
        try await advertiser.start()
        defer { Task { await advertiser.stop() } }
        let message1 = try await tunnel.receive(timeout: .seconds(10))
        let (result, response) = try NoiseHandshake.respondQR(
            to: message1, psk: derivePSK(secret: qr.secret, eidPlaintext: eid.bytes), peerIdentity: try qr.publicKey,
            ephemeralKey: P256.KeyAgreement.PrivateKey())
        var crypter = result.crypter
        let identity = P256.KeyAgreement.PrivateKey()
        var signature = LinkingInfo.handshakeSignature(
            authenticatorIdentity: identity, clientIdentity: try qr.publicKey, handshakeHash: result.handshakeHash)
        signature[0] ^= 0x01
        let info = LinkingInfo(
            contactID: [4, 5, 6], pairingID: Array(repeating: 1, count: 8), linkSecret: Array(repeating: 2, count: 32),
            authenticatorPublicKey: Array(identity.publicKey.x963Representation), name: "Pixel", handshakeSignature: signature)
        try await tunnel.send(response)
        try await tunnel.send(try crypter.encrypt(PostHandshakeMessage(getInfo: CBOR.encode(SoftwareAuthenticator.getInfo.cbor)).encode()))
        try await tunnel.send(try crypter.encrypt(UpdateMessage.frame(linking: info).bytes))
        // The desktop closes the tunnel once it has read the update.
        _ = try? await tunnel.receive(timeout: .seconds(10))
        await tunnel.close()
    }
}
