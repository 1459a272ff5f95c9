import HybridCore
@testable import HybridRuntime

/// A desktop driven message by message against the phone's real `AuthenticatorDriver.converse`
/// over an in-memory tunnel, for tests of what a phone does with a desktop that misbehaves after
/// the handshake (sends a second request, ends the transaction early). ``start`` runs the
/// handshake and returns once the desktop has the post-handshake message.
struct HandDrivenDesktop {
    struct SetupError: Error { let reason: String }

    var session: ClientSession
    /// The desktop's end of the tunnel.
    let tunnel: InMemoryTunnel
    /// The phone's `converse`, with the responder given to ``start``.
    let phone: Task<Void, any Error>

    static func start(
        requestType: QRPayload.RequestType, getInfo: [UInt8],
        phoneTunnel: (InMemoryTunnel) -> any TunnelTransport = { $0 }, timeouts: SessionTimeouts = .fast,
        respond: @escaping AuthenticatorDriver.Responder
    ) async throws -> HandDrivenDesktop {
        try await start(
            requestType: requestType, getInfo: getInfo, phoneTunnel: phoneTunnel, timeouts: timeouts,
            respondClaiming: { request, _ in await respond(request) })
    }

    /// ``start(requestType:getInfo:phoneTunnel:timeouts:respond:)`` with a responder that claims
    /// its answer (``AuthenticatorDriver/ClaimingResponder``).
    static func start(
        requestType: QRPayload.RequestType, getInfo: [UInt8],
        phoneTunnel: (InMemoryTunnel) -> any TunnelTransport = { $0 }, timeouts: SessionTimeouts = .fast,
        respondClaiming respond: @escaping AuthenticatorDriver.ClaimingResponder
    ) async throws -> HandDrivenDesktop {
        let (desktopEnd, phoneEnd) = InMemoryTunnel.pair()
        var desktop = ClientSession(requestType: requestType, timestamp: unixNow())
        var phoneSession = try AuthenticatorSession(qr: QRPayload(url: desktop.url), getInfo: getInfo)
        guard case .matched = desktop.receivedAdvert(try phoneSession.tunnelCreated(routingID: [1, 2, 3])) else {
            throw SetupError(reason: "the desktop did not match the phone's advert")
        }
        try await desktopEnd.send(desktop.tunnelConnected())
        let session = phoneSession
        let phoneTransport = phoneTunnel(phoneEnd)
        let phone = Task {
            var session = session
            // The user's timeout, which `run` throws once the tunnel is closed, fails the phone here too.
            if let userTimedOut = try await AuthenticatorDriver.converse(
                session: &session, tunnel: phoneTransport, advertisement: nil, timeouts: timeouts,
                transaction: TransactionDeadline(.seconds(30)), events: { _ in }, respond: respond)
            {
                throw userTimedOut
            }
        }
        var driven = HandDrivenDesktop(session: desktop, tunnel: desktopEnd, phone: phone)
        var ready = false
        while !ready {
            for action in try await driven.receive() {
                if case .ready = action { ready = true }
            }
        }
        return driven
    }

    /// The next message from the phone, through the desktop's session.
    mutating func receive() async throws -> [ClientSession.Action] {
        try session.receivedMessage(try await tunnel.receive(timeout: .seconds(5)))
    }

    /// Sends `request` and returns the phone's response (status ‖ CBOR).
    mutating func exchange(_ request: [UInt8]) async throws -> [UInt8] {
        try await tunnel.send(try session.encryptRequest(request))
        return try await response()
    }

    /// The phone's response to the request sent (status ‖ CBOR), whatever comes before it.
    mutating func response() async throws -> [UInt8] {
        while true {
            for action in try await receive() {
                if case .response(let bytes) = action { return bytes }
            }
        }
    }
}
