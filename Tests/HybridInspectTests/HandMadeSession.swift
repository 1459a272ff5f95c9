import CTAP2
import Crypto
import HybridCore

/// A QR session's recording made by hand, message by message, with its key-log entry: the shape of
/// a real one (handshake, post-handshake message, update, CTAP request and response, shutdown), each
/// transport message encrypted as the Crypter does, for tests that then cut, move or drop messages.
struct HandMadeSession {
    let keys: SessionKeys
    /// Writes with the desktop-to-phone key.
    var desktop: Crypter
    /// Writes with the phone-to-desktop key.
    var phone: Crypter
    var entries: [TunnelRecording.Entry] = []

    init() {
        let desktopKey = Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)
        keys = SessionKeys(
            initiatorEphemeral: desktopKey, handshakeHash: [UInt8](repeating: 9, count: 32),
            initiatorToResponder: (0..<32).map { UInt8($0) }, responderToInitiator: (0..<32).map { UInt8(0x80 + $0) })
        desktop = Crypter(readKey: keys.responderToInitiator, writeKey: keys.initiatorToResponder)
        phone = Crypter(readKey: keys.initiatorToResponder, writeKey: keys.responderToInitiator)
        let phoneKey = Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)
        append(.joinerToCreator, desktopKey + [UInt8](repeating: 0, count: 16))
        append(.creatorToJoiner, phoneKey + [UInt8](repeating: 0, count: 16))
    }

    /// The whole sign-in: post-handshake message, update, request, `response` (a status byte and its
    /// CBOR; a success by default), and the shutdown unless `shutdown` is false.
    static func signIn(response: [UInt8]? = nil, shutdown: Bool = true) throws -> HandMadeSession {
        var session = HandMadeSession()
        try session.phoneSends(PostHandshakeMessage(getInfo: CBOR.encode(SoftwareAuthenticator.getInfo.cbor)).encode())
        try session.phoneSends(UpdateMessage.frame(linking: nil).bytes)
        let request = CBOR.encode([1: "example.com", 2: .bytes([UInt8](repeating: 7, count: 32))])
        try session.desktopSends(Frame(type: .ctap, payload: [CTAP2Command.getAssertion.rawValue] + request).bytes)
        let success = [0x00] + CBOR.encode([
            1: ["id": .bytes([1, 2, 3]), "type": "public-key"], 2: .bytes([UInt8](repeating: 0, count: 32) + [0x05, 0, 0, 0, 1]),
            3: .bytes([UInt8](repeating: 3, count: 70)),
        ])
        try session.phoneSends(Frame(type: .ctap, payload: response ?? success).bytes)
        if shutdown { try session.desktopSends(Frame.shutdown.bytes) }
        session.entries.append(.init(nanoseconds: UInt64(session.entries.count + 1) * 1_000_000, event: .closed(code: 1000, reason: "")))
        return session
    }

    mutating func append(_ direction: TunnelRecording.Direction, _ bytes: [UInt8]) {
        entries.append(.init(nanoseconds: UInt64(entries.count + 1) * 1_000_000, event: .message(direction, bytes)))
    }

    mutating func phoneSends(_ plaintext: [UInt8]) throws { append(.creatorToJoiner, try phone.encrypt(plaintext)) }
    mutating func desktopSends(_ plaintext: [UInt8]) throws { append(.joinerToCreator, try desktop.encrypt(plaintext)) }

    /// The indexes in `entries` of the transport messages, in order.
    var transportIndexes: [Int] { Array(entries.indices.filter { if case .message = entries[$0].event { true } else { false } }.dropFirst(2)) }

    /// The bytes of entry `index` changed by `change` (its direction kept unless `direction` is given).
    mutating func change(_ index: Int, direction: TunnelRecording.Direction? = nil, _ change: ([UInt8]) -> [UInt8] = { $0 }) {
        guard case .message(let way, let bytes) = entries[index].event else { return }
        entries[index].event = .message(direction ?? way, change(bytes))
    }

    /// Entries in a new order (times follow the new order, as a relay records them).
    mutating func reorder(_ order: [Int]) {
        entries = order.enumerated().map { position, index in .init(nanoseconds: UInt64(position + 1) * 1_000_000, event: entries[index].event) }
    }

    var recording: TunnelRecording {
        TunnelRecording(startMilliseconds: 0, flow: .qr, tunnelID: [UInt8](repeating: 3, count: 16), routingID: [1, 2, 3], entries: entries)
    }
}
