import CTAP2
import HybridCore
import HybridRuntime
import Synchronization

/// `hybrid-sim phone --misbehave STEP`: a phone that breaks the protocol on purpose at one step, so
/// a desktop (a browser, a client library) can be tested for the error it reports
/// (Docs/FAULTS.md). Applied by wrapping the phone's transports and responder (and, for the steps
/// inside the encrypted channel, re-encrypting one message with the session's own traffic keys,
/// taken from its key-log hook); the protocol core is untouched, so everything else the phone sends
/// is correct.
public enum PhoneMisbehaviour: String, Sendable, Hashable, CaseIterable {
    /// The advert is encrypted under the EID key of another QR secret. A correct desktop cannot tell
    /// it from another session's advert: it ignores it and times out ("not for this QR code").
    case wrongAdvertKey = "wrong-advert-key"
    /// The advert's nonce is changed after the phone derived its PSK from it, so the desktop derives
    /// another PSK: the handshake fails at the phone (message 1 does not authenticate), which closes
    /// the tunnel; the desktop sees the tunnel closed while it waits for the handshake response.
    case wrongPSK = "wrong-psk"
    /// The advert names a routing ID the relay never assigned (as a stale advert would): the desktop's
    /// `/cable/connect` is refused with 404.
    case staleRoutingID = "stale-routing-id"
    /// One bit of handshake message 2's AES-GCM tag is flipped: the desktop's handshake fails.
    case badHandshake = "bad-handshake"
    /// The post-handshake message decrypts correctly but its plaintext is not the CBOR map it must
    /// be: the desktop rejects it.
    case badPostHandshake = "bad-post-handshake"
    /// With a desktop that offers linking (`desktop --link`): the linking information in the update
    /// message carries a handshake signature with one bit flipped; the desktop must not link.
    case badLinkingSignature = "bad-linking-signature"
    /// The CTAP2 response keeps its body but carries the status CTAP1_ERR_OTHER (0x7F): a correct
    /// desktop treats every non-zero status as a failure and ignores the body.
    case wrongCTAPStatus = "wrong-ctap-status"
    /// The CTAP2 response's CBOR is cut in half (then encrypted correctly): the desktop cannot parse it.
    case truncatedResponse = "truncated-response"

    /// The status `wrong-ctap-status` answers with.
    public static let wrongStatus = CTAP2StatusCode.other

    /// Wraps the phone's transports for `session`, whose keys the advert misbehaviours need and
    /// whose key-log hook the encrypted-channel ones chain to learn the traffic keys.
    public func wrap(_ transports: AuthenticatorDriver.Transports, session: inout AuthenticatorSession) -> AuthenticatorDriver.Transports {
        var wrapped = transports
        let (keys, secret) = (session.keys, session.qrPayload.secret)
        switch self {
        case .wrongAdvertKey, .wrongPSK, .staleRoutingID:
            let advertise = transports.advertise
            wrapped.advertise = { advert in try await advertise(self.rewrite(advert: advert, keys: keys, secret: secret)) }
        case .badHandshake:
            let createTunnel = transports.createTunnel
            wrapped.createTunnel = { path, timeout in
                let (tunnel, routingID) = try await createTunnel(path, timeout)
                // The phone's first message is handshake message 2; its last 16 bytes are the tag.
                return (TamperingTunnel(tunnel, messageNumber: 1) { $0[$0.count - 1] ^= 0x01 }, routingID)
            }
        case .badPostHandshake, .badLinkingSignature:
            let traffic = Mutex<SessionKeys?>(nil)
            let previous = session.keyLog
            session.keyLog = { keys in
                traffic.withLock { $0 = keys }
                previous?(keys)
            }
            // The phone's messages: handshake 2, post-handshake (sequence 0), update (sequence 1), response.
            let (number, sequence): (Int, UInt32) = self == .badPostHandshake ? (2, 0) : (3, 1)
            let breaksPostHandshake = self == .badPostHandshake
            let createTunnel = transports.createTunnel
            wrapped.createTunnel = { path, timeout in
                let (tunnel, routingID) = try await createTunnel(path, timeout)
                let tampering = TamperingTunnel(tunnel, messageNumber: number) { message in
                    guard let keys = traffic.withLock({ $0 }) else { return }
                    message = Self.reencrypt(message, key: keys.responderToInitiator, sequence: sequence) { plaintext in
                        // A CBOR map header with no entries after it: not the post-handshake map.
                        breaksPostHandshake ? [0xA1] : Self.breakLinkingSignature(inUpdate: plaintext)
                    }
                }
                return (tampering, routingID)
            }
        case .wrongCTAPStatus, .truncatedResponse:
            break
        }
        return wrapped
    }

    /// `ciphertext` (transport message `sequence` under `key`) decrypted, changed and encrypted again
    /// under the same key and sequence number, so only the plaintext is wrong.
    static func reencrypt(_ ciphertext: [UInt8], key: [UInt8], sequence: UInt32, change: ([UInt8]) -> [UInt8]) -> [UInt8] {
        var crypter = Crypter(readKey: key, writeKey: key, readSequence: sequence, writeSequence: sequence)
        guard let plaintext = try? crypter.decrypt(ciphertext), let out = try? crypter.encrypt(change(plaintext)) else {
            return ciphertext
        }
        return out
    }

    /// An update frame whose linking information has one bit of its handshake signature flipped
    /// (unchanged when it carries none).
    static func breakLinkingSignature(inUpdate plaintext: [UInt8]) -> [UInt8] {
        guard let frame = try? Frame(bytes: plaintext), frame.type == .update,
            let map = try? UpdateMessage.parse(payload: frame.payload), var linking = try? LinkingInfo(cbor: map),
            !linking.handshakeSignature.isEmpty
        else { return plaintext }
        linking.handshakeSignature[0] ^= 0x01
        return UpdateMessage.frame(linking: linking).bytes
    }

    /// The response the phone sends instead of `response` (status ‖ CBOR).
    public func response(_ response: [UInt8]) -> [UInt8] {
        switch self {
        case .wrongCTAPStatus:
            return [Self.wrongStatus.rawValue] + response.dropFirst()
        case .truncatedResponse:
            return Array(response.prefix(1 + (response.count - 1) / 2))
        default:
            return response
        }
    }

    private func rewrite(advert: [UInt8], keys: QRSecretKeys, secret: [UInt8]) -> [UInt8] {
        let cipher = AdvertCipher(eidKey: keys.eidKey)
        guard case .matched(_, var eid) = cipher.decrypt(advert: advert) else { return advert }
        switch self {
        case .wrongAdvertKey:
            let otherSecret = secret.map { $0 ^ 0x5A }
            return AdvertCipher(eidKey: QRSecretKeys(qrSecret: otherSecret).eidKey).encrypt(plaintext: eid.bytes)
        case .wrongPSK:
            eid.nonce = eid.nonce.map { $0 ^ 0xFF }
        case .staleRoutingID:
            eid.routingID = eid.routingID.map { $0 ^ 0xFF }
        default:
            return advert
        }
        return cipher.encrypt(plaintext: eid.bytes)
    }
}

/// `hybrid-sim desktop --misbehave STEP`: a desktop that breaks the protocol on purpose at one step,
/// so a phone (an authenticator) can be tested for the error it reports (Docs/FAULTS.md).
public enum DesktopMisbehaviour: String, Sendable, Hashable, CaseIterable {
    /// One bit of handshake message 1's AES-GCM tag is flipped: the phone's handshake fails.
    case badHandshake = "bad-handshake"
    /// The CTAP2 request keeps its command byte but its CBOR is cut in half: the authenticator answers
    /// CTAP2_ERR_INVALID_CBOR.
    case badCTAPRequest = "bad-ctap-request"
    /// The desktop closes the tunnel after the response without sending the shutdown message (as
    /// revision 0 desktops do): a tolerant phone ends the transaction normally.
    case noShutdown = "no-shutdown"

    /// Wraps the desktop's transports.
    public func wrap(_ transports: ClientDriver.Transports) -> ClientDriver.Transports {
        var wrapped = transports
        let connect = transports.connect
        switch self {
        case .badHandshake:
            wrapped.connect = { path, domain, timeout in
                TamperingTunnel(try await connect(path, domain, timeout), messageNumber: 1) { $0[$0.count - 1] ^= 0x01 }
            }
        case .noShutdown:
            // The desktop's third message is the shutdown (handshake, request, shutdown).
            wrapped.connect = { path, domain, timeout in
                TamperingTunnel(try await connect(path, domain, timeout), messageNumber: 3, drop: true)
            }
        case .badCTAPRequest:
            break
        }
        return wrapped
    }

    /// The request the desktop sends instead of `request` (command ‖ CBOR).
    public func request(_ request: [UInt8]) -> [UInt8] {
        guard self == .badCTAPRequest else { return request }
        return Array(request.prefix(1 + (request.count - 1) / 2))
    }
}

/// A tunnel that changes (or swallows) the `messageNumber`-th message it sends (1-based).
final class TamperingTunnel: TunnelTransport {
    private let base: any TunnelTransport
    private let messageNumber: Int
    private let drop: Bool
    private let change: @Sendable (inout [UInt8]) -> Void
    private let sent = Mutex(0)

    init(
        _ base: any TunnelTransport, messageNumber: Int, drop: Bool = false,
        change: @escaping @Sendable (inout [UInt8]) -> Void = { _ in }
    ) {
        self.base = base
        self.messageNumber = messageNumber
        self.drop = drop
        self.change = change
    }

    func send(_ message: [UInt8]) async throws {
        let number = sent.withLock { count in
            count += 1
            return count
        }
        guard number == messageNumber, !message.isEmpty else { return try await base.send(message) }
        if drop { return }
        var changed = message
        change(&changed)
        try await base.send(changed)
    }

    func receive(timeout: Duration) async throws -> [UInt8] {
        try await base.receive(timeout: timeout)
    }

    func receiveIfReady() -> [UInt8]? { base.receiveIfReady() }

    func awaitIncoming() async { await base.awaitIncoming() }

    func close(code: WebSocketCloseCode, reason: String) async {
        await base.close(code: code, reason: reason)
    }
}
