import CTAP2
import HybridCore
import HybridRuntime
import Testing

/// A getAssertion request for ``exampleRP`` (discoverable).
func signInRequest() -> [UInt8] {
    Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32)).requestBytes
}

/// Faults on the relay's side of the transaction: each ends both sides with a specific error, and
/// none waits for a timeout it should not need.
@Suite("Faults: relay and tunnel", .timeLimit(.minutes(1)))
struct FaultRelayTests {
    @Test("the relay shutting down while a request is still arriving (its head, or part of its request line) answers it 503 'relay shutting down', not a reset; a silent connection is closed")
    func shutdownAnswersRequestsInProgress() async throws {
        try await withRelay { relay, endpoint in
            let path = TunnelServicePath.new(tunnelID: randomTunnelID()).path
            // A head without its blank line: the request has begun, not ended.
            let begun = try await RawConnection.connect(port: endpoint.port)
            try await begun.write(String(RawConnection.upgradeRequest(path: path).dropLast(2)))
            // Part of a request line: begun too.
            let partial = try await RawConnection.connect(port: endpoint.port)
            try await partial.write("GET /cable/ne")
            let silent = try await RawConnection.connect(port: endpoint.port)
            #expect(await eventually { relay.statistics.openConnections == 3 })
            let stopping = Task { await relay.shutdown() }
            for connection in [begun, partial] {
                let head = await connection.readResponseHead()
                #expect(RawConnection.status(of: head) == 503, "\(head)")
                #expect(await connection.waitForClose())
            }
            #expect(await silent.waitForClose())
            await stopping.value
        }
    }

    @Test("the relay shutting down mid-handshake ends both sides with the relay's 1001")
    func relayStopsMidHandshake() async throws {
        try await withHarness { harness in
            let account = Account.make("alice")
            var rig = SessionRig(relayURL: harness.relayURL, phone: SimulatedPhone(passkeys: [account.passkey]))
            let relay = harness.relay
            // The phone has received handshake message 1 and not answered yet: stop the relay now.
            rig.phoneTransports = { transports in
                transports.wrappingTunnel { tunnel in
                    TunnelTap(tunnel, onReceive: { received, message in
                        if received == 1 { await relay.shutdown() }
                        return message
                    })
                }
            }
            let outcome = try await rig.run(request: signInRequest(), hint: .getAssertion)

            let desktop = try #require(outcome.desktopError())
            #expect(desktop.side == .desktop)
            #expect(desktop.step == "waiting for the handshake response")
            #expect(desktop.runtimeCode == .closed)
            #expect((desktop.underlying as? RuntimeError)?.closeCode == .goingAway)
            #expect("\(desktop)".contains("relay shutting down"))

            let phone = try #require(outcome.phoneError())
            #expect(phone.side == .phone)
            #expect(phone.step == "sending to the desktop")
            #expect(phone.runtimeCode == .closed)

            #expect(outcome.elapsed < rig.timeouts.total)
            #expect(relay.openTunnelCount == 0)
            #expect(relay.statistics.tunnelsClosed[WebSocketCloseCode.goingAway.rawValue] == 1)
        }
    }

    /// One byte of one relayed message flipped, and who must notice.
    struct Flip: Sendable, CustomTestStringConvertible {
        var message: String
        var direction: RelayDirection
        /// 0-based index of the message in its direction.
        var index: Int
        var side: TransactionError.Side
        var step: String
        var code: HybridError.Code
        /// The desktop has its response before the flipped message (the shutdown) is read.
        var desktopSucceeds = false

        var testDescription: String { "\(message) (\(direction) #\(index))" }
    }

    static let flips: [Flip] = [
        Flip(
            message: "handshake message 1", direction: .joinerToCreator, index: 0, side: .phone,
            step: "waiting for the desktop's handshake", code: .handshakeFailed),
        Flip(
            message: "handshake message 2", direction: .creatorToJoiner, index: 0, side: .desktop,
            step: "waiting for the handshake response", code: .handshakeFailed),
        Flip(
            message: "post-handshake message", direction: .creatorToJoiner, index: 1, side: .desktop,
            step: "waiting for the post-handshake message", code: .decryptionFailed),
        Flip(
            message: "CTAP request", direction: .joinerToCreator, index: 1, side: .phone,
            step: "waiting for the desktop's request", code: .decryptionFailed),
        Flip(
            message: "CTAP response", direction: .creatorToJoiner, index: 3, side: .desktop,
            step: "reading the phone's response", code: .decryptionFailed),
        Flip(
            message: "shutdown", direction: .joinerToCreator, index: 2, side: .phone,
            step: "waiting for the desktop to end the transaction", code: .decryptionFailed, desktopSucceeds: true),
    ]

    @Test("a byte flipped in transit by the relay's fault hook is caught by the receiving side", arguments: flips)
    func flippedByte(flip: Flip) async throws {
        var configuration = RelayConfiguration()
        let counts = LockedBox<[RelayDirection: Int]>([:])
        configuration.faultInjector = { direction, message in
            var index = 0
            counts.update { counts in
                index = counts[direction, default: 0]
                counts[direction] = index + 1
            }
            if direction == flip.direction, index == flip.index { message[message.count / 2] ^= 0x01 }
        }
        try await withHarness(configuration) { harness in
            let account = Account.make("alice")
            let rig = SessionRig(relayURL: harness.relayURL, phone: SimulatedPhone(passkeys: [account.passkey]))
            let outcome = try await rig.run(request: signInRequest(), hint: .getAssertion)

            let (failed, other) = flip.side == .desktop
                ? (outcome.desktopError(), outcome.phone.map { _ in () })
                : (outcome.phoneError(), outcome.desktop.map { _ in () })
            let error = try #require(failed)
            #expect(error.side == flip.side)
            #expect(error.step == flip.step)
            #expect(error.hybridCode == flip.code, "\(error)")

            switch (other, flip.desktopSucceeds) {
            case (.success, true):
                break
            case (.failure(let error), true):
                Issue.record("the other side was done before the flipped message mattered, yet failed: \(error)")
            case (.success, false):
                Issue.record("the other side succeeded although the tunnel was closed under it")
            case (.failure(let error), false):
                // The failing side closed the tunnel with 1011; the other side learns it from the
                // relay at once, and as a failure: even the phone that had already sent its response
                // (it would take a normal close for the end, Docs/PROTOCOL-TOLERANCE.md).
                #expect((error as? TransactionError)?.runtimeCode == .closed, "\(error)")
                #expect(((error as? TransactionError)?.underlying as? RuntimeError)?.closeCode == .internalError, "\(error)")
            }
            #expect(outcome.elapsed < rig.timeouts.total)
            #expect(await eventually { harness.relay.openTunnelCount == 0 })
        }
    }

    @Test("joining with a wrong tunnel or routing ID is refused with 404", arguments: ["tunnel ID", "routing ID"])
    func wrongID(which: String) async throws {
        try await withHarness { harness in
            let account = Account.make("alice")
            var rig = SessionRig(relayURL: harness.relayURL, phone: SimulatedPhone(passkeys: [account.passkey]))
            rig.timeouts.handshake = .milliseconds(1500)  // the phone waits for a join that never comes
            rig.desktopTransports = { base in
                ClientDriver.Transports(
                    nextAdvert: base.nextAdvert,
                    connect: { path, domain, timeout in
                        guard case .connect(let routingID, let tunnelID) = TunnelServicePath(parsing: path) else {
                            throw RuntimeError(.invalidAddress, "not a connect path: \(path)")
                        }
                        let wrong: TunnelServicePath =
                            which == "tunnel ID"
                            ? .connect(routingID: routingID, tunnelID: randomTunnelID())
                            : .connect(routingID: routingID.map { $0 ^ 0xFF }, tunnelID: tunnelID)
                        return try await base.connect(wrong.path, domain, timeout)
                    })
            }
            let outcome = try await rig.run(request: signInRequest(), hint: .getAssertion)

            let desktop = try #require(outcome.desktopError())
            #expect(desktop.side == .desktop)
            #expect(desktop.step == "joining the tunnel")
            #expect(desktop.runtimeCode == .upgradeRejected)
            #expect((desktop.underlying as? RuntimeError)?.httpStatus == 404)

            // Nobody joins the phone's tunnel: it gives up at its handshake timeout.
            let phone = try #require(outcome.phoneError())
            #expect(phone.step == "waiting for the desktop's handshake")
            #expect(phone.runtimeCode == .timeout)
            #expect(outcome.elapsed < rig.timeouts.total)
            #expect(harness.relay.statistics.rejectedRequests[404] == 1)
            #expect(await eventually { harness.relay.openTunnelCount == 0 })
        }
    }

    @Test("a second desktop that knows the QR code and heard the advert cannot join: 409, and the first still signs in")
    func secondDesktop() async throws {
        try await withHarness { harness in
            let account = Account.make("alice")
            let secret = RandomSource.system.bytes(16)
            var rig = SessionRig(relayURL: harness.relayURL, phone: SimulatedPhone(passkeys: [account.passkey]))
            rig.qrSecret = secret
            let intruderResult = LockedBox<Result<ClientDriver.Outcome, any Error>?>(nil)
            rig.desktopTransports = { base in
                let heard = LockedBox<[UInt8]?>(nil)
                return ClientDriver.Transports(
                    nextAdvert: { timeout in
                        let found = try await base.nextAdvert(timeout)
                        heard.update { $0 = found.advert }
                        return found
                    },
                    connect: { path, domain, timeout in
                        let tunnel = try await base.connect(path, domain, timeout)
                        // The first desktop has joined; the intruder (same QR secret, own identity key)
                        // decrypts the same advert and asks to join the same tunnel.
                        let intruder = ClientSession(requestType: .getAssertion, timestamp: unixNow(), qrSecret: secret)
                        let result = await Result {
                            try await ClientDriver.run(
                                session: intruder, request: signInRequest(),
                                transports: ClientDriver.Transports(
                                    nextAdvert: { _ in
                                        guard let advert = heard.value else {
                                            throw RuntimeError(.invalidState, "no advert heard")
                                        }
                                        return (advert, -45, 0)
                                    },
                                    connect: base.connect),
                                timeouts: .fast)
                        }
                        intruderResult.update { $0 = result }
                        return tunnel
                    })
            }
            let outcome = try await rig.run(request: signInRequest(), hint: .getAssertion)

            guard case .failure(let failure as TransactionError) = try #require(intruderResult.value) else {
                Issue.record("the intruder did not fail with a TransactionError: \(String(describing: intruderResult.value))")
                return
            }
            #expect(failure.side == .desktop)
            #expect(failure.step == "joining the tunnel")
            #expect(failure.runtimeCode == .upgradeRejected)
            #expect((failure.underlying as? RuntimeError)?.httpStatus == 409)

            let response = try outcome.desktop.get().response
            try outcome.phone.get()
            #expect(response.first == CTAP2StatusCode.ok.rawValue)
            #expect(harness.relay.statistics.rejectedRequests[409] == 1)
            #expect(harness.relay.statistics.tunnelsJoined == 1)
        }
    }
}
