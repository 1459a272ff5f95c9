import CTAP2

/// The phone's side of a tunnel after the handshake (Chromium phone, state `kReady`): typed,
/// encrypted frames from the client, one request at a time. Shared by ``AuthenticatorSession`` and
/// ``LinkedAuthenticatorSession``.
struct AuthenticatorChannel: Sendable {
    private(set) var crypter: Crypter
    /// A request was handed out and its response is not encrypted yet.
    private(set) var awaitingResponse = false

    init(crypter: Crypter) {
        self.crypter = crypter
    }

    /// One message from the client: a request, the shutdown, or nothing (an update, ignored as
    /// Chromium phones do). Throws for anything else.
    mutating func received(_ message: [UInt8]) throws(HybridError) -> AuthenticatorSession.Action? {
        let frame = try Frame(bytes: try crypter.decrypt(message))
        switch frame.type {
        case .ctap:
            guard !awaitingResponse else { throw HybridError(.unexpectedMessage, "a second request before the first was answered") }
            guard !frame.payload.isEmpty else { throw HybridError(.invalidCTAPMessage, "CTAP request without a command byte") }
            awaitingResponse = true
            return .request(frame.payload)
        case .shutdown:
            return .shutdown
        case .update:
            return nil
        case .json:
            throw HybridError(.unexpectedMessage, "JSON messages are not supported by this authenticator")
        }
    }

    /// Encrypts the answer to the outstanding request as a `kCTAP` frame.
    mutating func encryptResponse(_ response: [UInt8]) throws(HybridError) -> [UInt8] {
        precondition(awaitingResponse, "encryptResponse(_:) without an outstanding request")
        let ciphertext = try crypter.encrypt(Frame(type: .ctap, payload: response).bytes)
        awaitingResponse = false
        return ciphertext
    }
}

/// The desktop's side of a tunnel after the post-handshake message (Chromium
/// `FidoTunnelDevice::EstablishedConnection`): requests out, responses and updates in. Shared by
/// ``ClientSession`` and ``LinkedClientSession``.
struct ClientChannel: Sendable {
    /// What arrived.
    enum Received {
        /// An update message and its linking map, if any.
        case update(CBORValue?)
        /// The response to the outstanding request (status ‖ CBOR).
        case response([UInt8])
    }

    private(set) var crypter: Crypter
    /// A request is outstanding.
    private(set) var awaitingResponse = false

    init(crypter: Crypter) {
        self.crypter = crypter
    }

    /// One message from the phone. Throws for a shutdown or JSON frame, or a response nobody asked for.
    mutating func received(_ message: [UInt8]) throws(HybridError) -> Received {
        let frame = try Frame(bytes: try crypter.decrypt(message))
        switch frame.type {
        case .update:
            return .update(try UpdateMessage.parse(payload: frame.payload))
        case .ctap:
            guard awaitingResponse else { throw HybridError(.unexpectedMessage, "CTAP message without an outstanding request") }
            guard !frame.payload.isEmpty else { throw HybridError(.invalidCTAPMessage, "CTAP response without a status byte") }
            awaitingResponse = false
            return .response(frame.payload)
        case .shutdown where !frame.payload.isEmpty:
            throw HybridError(
                .unexpectedMessage,
                "the authenticator sent a message of type 0 (shutdown, which only clients send, and bare) with \(frame.payload.count) "
                    + "more bytes: is its type byte (01 for a CTAP response) missing?")
        case .shutdown:
            throw HybridError(.unexpectedMessage, "the authenticator sent a shutdown message (only clients do)")
        case .json:
            throw HybridError(.unexpectedMessage, "JSON messages are not supported by this client")
        }
    }

    /// Encrypts a CTAP2 request as a `kCTAP` frame; one at a time.
    mutating func encryptRequest(_ request: [UInt8]) throws(HybridError) -> [UInt8] {
        precondition(!awaitingResponse, "encryptRequest(_:) while a request is outstanding")
        let ciphertext = try crypter.encrypt(Frame(type: .ctap, payload: request).bytes)
        awaitingResponse = true
        return ciphertext
    }

    /// Encrypts the shutdown message (`00`).
    mutating func encryptShutdown() throws(HybridError) -> [UInt8] {
        try crypter.encrypt(Frame.shutdown.bytes)
    }
}
