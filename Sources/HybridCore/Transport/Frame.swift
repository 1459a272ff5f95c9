import CTAP2

/// The type byte that starts every tunnel message after the post-handshake message
/// (protocol revision 1; Chromium `MessageType`). Raw values must not change.
public enum MessageType: UInt8, Sendable, CaseIterable {
    /// Desktop → phone: the transaction is over. No payload.
    case shutdown = 0
    /// Both ways: a CTAP2 request (command ‖ CBOR) or response (status ‖ CBOR).
    case ctap = 1
    /// Phone → desktop: a CBOR map with padding and optional linking information.
    case update = 2
    /// Both ways: UTF-8 JSON (digital credentials; Chromium only).
    case json = 3
}

/// One framed tunnel message: a type byte and its payload.
public struct Frame: Sendable, Hashable {
    /// The message type.
    public var type: MessageType
    /// Everything after the type byte.
    public var payload: [UInt8]

    /// Creates a frame.
    public init(type: MessageType, payload: [UInt8] = []) {
        self.type = type
        self.payload = payload
    }

    /// Parses a decrypted message. Unknown types (> 3) are rejected, as Chromium closes on them.
    public init(bytes: [UInt8]) throws(HybridError) {
        guard let first = bytes.first else { throw HybridError(.invalidFrame, "empty tunnel message") }
        guard let type = MessageType(rawValue: first) else {
            throw HybridError(.invalidFrame, "unknown message type \(first)")
        }
        self.init(type: type, payload: Array(bytes.dropFirst()))
    }

    /// The bytes to encrypt.
    public var bytes: [UInt8] { [type.rawValue] + payload }

    /// The shutdown frame, a single `00`.
    public static let shutdown = Frame(type: .shutdown)
}

/// The update message a Chromium phone sends right after the post-handshake message:
/// `02 ‖ CBOR{0: zeros, 1?: linking map}`, padded so the plaintext always reaches 512 bytes after
/// transport padding, whether or not the user agreed to linking.
public enum UpdateMessage {
    /// Builds the frame with the Chromium padding formula
    /// `512 − 16 − 1 − 3 − len(CBOR{1: linking})` (492 without linking).
    public static func frame(linking: LinkingInfo?) -> Frame {
        let linkingLength = linking.map { CBOR.encode([1: $0.cbor]).count } ?? 0
        let paddingLength = HybridConstants.updateMessagePaddingTarget - 16 - 1 - 3 - linkingLength
        var map: [CBORValue: CBORValue] = [0: .bytes([UInt8](repeating: 0, count: max(paddingLength, 0)))]
        if let linking { map[1] = linking.cbor }
        return Frame(type: .update, payload: CBOR.encode(.map(map)))
    }

    /// Parses an update payload as a Chromium desktop does: a CBOR map; key 1, if present, a
    /// linking map. Returns the raw linking map for verification.
    public static func parse(payload: [UInt8]) throws(HybridError) -> CBORValue? {
        let value: CBORValue
        do {
            value = try CBOR.decode(payload)
        } catch {
            throw HybridError(.invalidFrame, "update message is not CBOR (\(error))")
        }
        guard let map = value.mapValue else { throw HybridError(.invalidFrame, "update message is not a CBOR map") }
        guard let linking = map[1] else { return nil }
        guard linking.mapValue != nil else { throw HybridError(.invalidLinkingInfo, "update key 1 is not a map") }
        return linking
    }
}
