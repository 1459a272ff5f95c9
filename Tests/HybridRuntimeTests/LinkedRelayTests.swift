import CTAP2
import Foundation
import HybridCore
import HybridRuntime
import NIOPosix
import Testing

/// The relay's linked-flow endpoints from the outside: `/cable/listen/…` (the push channel) and
/// `/cable/contact/…`, with their documented answers, over real loopback sockets.
@Suite("Relay: push channel and contact requests", .serialized, .timeLimit(.minutes(1)))
struct LinkedRelayTests {
    /// A short contact wait, and no grace after the start: these tests ask about contact IDs the
    /// relay never heard of, which a relay that has run a while calls unknown.
    static var configuration: RelayConfiguration {
        var configuration = RelayConfiguration()
        configuration.contactWait = .milliseconds(300)
        configuration.contactGraceAfterStart = .zero
        return configuration
    }

    static func payload(pairingID: [UInt8] = Array(repeating: 7, count: 8), nonce: [UInt8] = RandomSource.system.bytes(16)) -> ClientPayload {
        ClientPayload(pairingID: pairingID, clientNonce: nonce, requestType: .getAssertion)
    }

    static func contact(_ endpoint: RelayEndpoint, _ contactID: [UInt8], header: String?) async throws -> WebSocketTunnel {
        var options = WebSocketTunnel.Options()
        if let header { options.extraHeaders = [("X-caBLE-Client-Payload", header)] }
        return try await WebSocketTunnel.open(
            url: endpoint.url + TunnelServicePath.contact(contactID: contactID).path, timeout: .seconds(5), options: options)
    }

    /// A listen token named for a test (its name's bytes, zero-padded to 32).
    static func token(_ name: String) -> ListenToken {
        ListenToken(bytes: Array((Array(name.utf8) + [UInt8](repeating: 0, count: ListenToken.size)).prefix(ListenToken.size)))!
    }

    /// Listens on `token`'s contact ID, proving it with `token` (`nil`: no token header).
    static func listen(
        _ endpoint: RelayEndpoint, _ token: ListenToken?, contactID: [UInt8]? = nil, revoked: [String] = []
    ) async throws -> WebSocketTunnel {
        var options = WebSocketTunnel.Options()
        if let token { options.extraHeaders.append((PushChannel.listenTokenHeader, token.base64URL)) }
        if !revoked.isEmpty { options.extraHeaders.append((PushChannel.revokedHeader, revoked.joined(separator: ","))) }
        let id = contactID ?? token?.contactID ?? [1, 2, 3]
        return try await WebSocketTunnel.open(
            url: endpoint.url + TunnelServicePath.listenPath(contactID: id), timeout: .seconds(5), options: options)
    }

    @Test("a contact ID no phone announced within the wait: 410 (contact ID unknown), after the wait, not before")
    func unknownIsGone() async throws {
        try await withRelay(Self.configuration) { _, endpoint in
            let start = ContinuousClock.now
            let error = await expectRuntimeError(.upgradeRejected) {
                _ = try await Self.contact(endpoint, Array("nobody".utf8), header: Self.payload().headerValue)
            }
            #expect(error?.httpStatus == 410)
            #expect(error?.description.contains("contact ID unknown") == true)
            #expect(ContinuousClock.now - start >= .milliseconds(300))
        }
    }

    /// Just after a (re)start the relay cannot tell a phone it never knew from one that listened
    /// before the restart and is not back yet: 504, which leaves a desktop's link in place, until
    /// the grace has passed; then 410.
    @Test("within the grace after the start, a contact ID no phone announced is 504 (link kept), not 410; after it, 410")
    func unknownWithinGraceAfterStart() async throws {
        var configuration = Self.configuration
        configuration.contactGraceAfterStart = .seconds(1)
        try await withRelay(configuration) { relay, endpoint in
            let early = await expectRuntimeError(.upgradeRejected) {
                _ = try await Self.contact(endpoint, Array("nobody".utf8), header: Self.payload().headerValue)
            }
            #expect(early?.httpStatus == 504, "\(String(describing: early))")
            #expect(early?.description.contains("no phone had listened for this contact ID when the request came, 0 s after the relay started") == true, "\(String(describing: early))")
            try await Task.sleep(for: .milliseconds(800))
            let late = await expectRuntimeError(.upgradeRejected) {
                _ = try await Self.contact(endpoint, Array("nobody".utf8), header: Self.payload().headerValue)
            }
            #expect(late?.httpStatus == 410, "\(String(describing: late))")
            #expect(relay.statistics.rejectedRequests == [504: 1, 410: 1], "\(relay.statistics.rejectedRequests)")
        }
        // Judged when the request arrives: a grace shorter than the contact wait still counts.
        configuration.contactGraceAfterStart = .seconds(1)
        configuration.contactWait = .seconds(2)
        try await withRelay(configuration) { _, endpoint in
            let early = await expectRuntimeError(.upgradeRejected) {
                _ = try await Self.contact(endpoint, Array("nobody".utf8), header: Self.payload().headerValue)
            }
            #expect(early?.httpStatus == 504, "\(String(describing: early))")
        }
        // The grace counts from the relay's start, not from its first linked request.
        configuration.contactWait = .milliseconds(300)
        configuration.contactGraceAfterStart = .milliseconds(500)
        try await withRelay(configuration) { _, endpoint in
            try await Task.sleep(for: .milliseconds(700))
            let first = await expectRuntimeError(.upgradeRejected) {
                _ = try await Self.contact(endpoint, Array("nobody".utf8), header: Self.payload().headerValue)
            }
            #expect(first?.httpStatus == 410, "\(String(describing: first))")
        }
    }

    /// The contact wait (3 s) is longer than this relay's upgrade timeout (1 s): the request is
    /// complete and being decided, so the timeout does not cut it, and the desktop hears 410.
    @Test("an upgrade timeout shorter than the contact wait does not drop a waiting contact request: 410 at the end of the wait")
    func contactWaitOutlivesUpgradeTimeout() async throws {
        var configuration = RelayConfiguration()
        configuration.upgradeTimeout = .seconds(1)
        configuration.contactWait = .seconds(2)
        configuration.contactGraceAfterStart = .zero
        try await withRelay(configuration) { relay, endpoint in
            let start = ContinuousClock.now
            let error = await expectRuntimeError(.upgradeRejected) {
                _ = try await Self.contact(endpoint, Array("nobody".utf8), header: Self.payload().headerValue)
            }
            #expect(error?.httpStatus == 410, "\(String(describing: error))")
            #expect(error?.description.contains("contact ID unknown") == true)
            #expect(ContinuousClock.now - start >= .seconds(2))
            #expect(relay.statistics.rejectedRequests[410] == 1, "\(relay.statistics.rejectedRequests)")
        }
    }

    @Test("no or malformed X-caBLE-Client-Payload: 400")
    func payloadRequired() async throws {
        try await withRelay(Self.configuration) { _, endpoint in
            for header in [nil, "zz", "A0", Hex.encode(CBOR.encode([1: .bytes([1, 2])]), uppercase: true)] as [String?] {
                let error = await expectRuntimeError(.upgradeRejected) {
                    _ = try await Self.contact(endpoint, [1, 2, 3], header: header)
                }
                #expect(error?.httpStatus == 400, "header \(header ?? "none")")
            }
        }
    }

    @Test("a revoked contact ID announced by the listening phone: 410 (contact ID revoked) at once, and listening on it is refused")
    func revokedIsGone() async throws {
        var configuration = Self.configuration
        configuration.contactWait = .seconds(8)  // an answer well before this proves it did not wait
        try await withRelay(configuration) { _, endpoint in
            let old = Self.token("old contact"), current = Self.token("new contact")
            let channel = try await Self.listen(endpoint, current, revoked: [old.base64URL])
            let start = ContinuousClock.now
            let error = await expectRuntimeError(.upgradeRejected) {
                _ = try await Self.contact(endpoint, old.contactID, header: Self.payload().headerValue)
            }
            #expect(error?.httpStatus == 410)
            #expect(error?.description.contains("contact ID revoked") == true)
            #expect(ContinuousClock.now - start < .seconds(4))
            let listenError = await expectRuntimeError(.upgradeRejected) { _ = try await Self.listen(endpoint, old) }
            #expect(listenError?.httpStatus == 410)
            await channel.close()
        }
    }

    @Test("a desktop that left while its contact request waited: no tunnel and no push for it when the phone listens, and the phone is free for the next desktop")
    func desktopLeftWhileWaiting() async throws {
        var configuration = Self.configuration
        configuration.contactWait = .seconds(5)
        try await withRelay(configuration) { relay, endpoint in
            let token = Self.token("left early"), contactID = token.contactID
            let request = RawConnection.upgradeRequest(path: TunnelServicePath.contact(contactID: contactID).path)
                .replacingOccurrences(
                    of: "Content-Length: 0\r\n", with: "X-caBLE-Client-Payload: \(Self.payload().headerValue)\r\n")
            let leaving = try await RawConnection.connect(port: endpoint.port)
            try await leaving.write(request)
            #expect(await eventually { relay.statistics.waitingContacts == 1 }, "the request is waiting for its phone")
            await leaving.close()
            #expect(await eventually { relay.statistics.waitingContacts == 0 }, "forgotten when its desktop left, not at the wait's end")
            let channel = try await Self.listen(endpoint, token)
            #expect(relay.openTunnelCount == 0, "no tunnel for the desktop that left")
            #expect(relay.statistics.rejectedRequests[410] == nil, "and no refusal counted for it")
            // Not 409 (phone busy): the next desktop gets its tunnel, and the first push the phone
            // gets is that desktop's (the one that left was never pushed: its join would be a 404).
            let next = Self.payload()
            let desktop = try await Self.contact(endpoint, contactID, header: next.headerValue)
            let push = try PushMessage(bytes: try await channel.receive(timeout: .seconds(5)))
            #expect(push.clientPayload == next.cbor)
            await desktop.close()
            await channel.close()
        }
    }

    @Test("a desktop's contact request and its leaving read together (the relay did not run meanwhile): no tunnel and no push for it, though its phone listens")
    func desktopLeftWhileTheRelaySlept() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        try await withRelay(Self.configuration, group: group) { relay, endpoint in
            let token = Self.token("slept"), contactID = token.contactID
            let channel = try await Self.listen(endpoint, token)
            #expect(await eventually { relay.statistics.waitingContacts == 0 })
            // The relay's one loop does not run for 600 ms; meanwhile the desktop connects (the
            // kernel accepts it), sends its request and leaves.
            let (asleep, sleeping) = AsyncStream<Void>.makeStream()
            group.next().execute {
                sleeping.finish()
                Thread.sleep(forTimeInterval: 0.6)
            }
            for await _ in asleep {}
            let request = RawConnection.upgradeRequest(path: TunnelServicePath.contact(contactID: contactID).path)
                .replacingOccurrences(
                    of: "Content-Length: 0\r\n", with: "X-caBLE-Client-Payload: \(Self.payload().headerValue)\r\n")
            let leaving = try await RawConnection.connect(port: endpoint.port)
            try await leaving.write(request)
            await leaving.close()
            // The absence of a push can only be seen over a window: the relay has woken and read
            // the request well within it (a push would come at once).
            let pushed = try? await channel.receive(timeout: .seconds(1))
            #expect(pushed == nil, "no push for a desktop that had left")
            #expect(relay.openTunnelCount == 0 && relay.statistics.tunnelsOpened == 0, "no tunnel for it")
            await channel.close()
        }
        try await group.shutdownGracefully()
    }

    @Test("a phone that listened and left: 504 (not listening) after the wait")
    func knownButNotListening() async throws {
        try await withRelay(Self.configuration) { relay, endpoint in
            let token = Self.token("phone"), id = token.contactID
            let channel = try await Self.listen(endpoint, token)
            await channel.close()
            #expect(await eventually { relay.statistics.openConnections == 0 }, "the relay saw the phone leave")
            let error = await expectRuntimeError(.upgradeRejected) {
                _ = try await Self.contact(endpoint, id, header: Self.payload().headerValue)
            }
            #expect(error?.httpStatus == 504)
            #expect(error?.description.contains("the linked phone is not listening") == true)
            #expect(relay.statistics.rejectedRequests[504] == 1)
        }
    }

    @Test("contact → push (tunnel ID, routing ID, payload) → the phone joins with /cable/connect; messages flow both ways; a second desktop meanwhile: 409")
    func pushJoinAndBusy() async throws {
        try await withRelay(Self.configuration) { _, endpoint in
            let token = Self.token("phone"), id = token.contactID
            let channel = try await Self.listen(endpoint, token)
            let payload = Self.payload()
            // The desktop may contact before the phone's channel is registered: the relay waits.
            let desktop = try await Self.contact(endpoint, id, header: payload.headerValue)
            let push = try PushMessage(bytes: try await channel.receive(timeout: .seconds(5)))
            #expect(push.clientPayload == payload.cbor)
            let busy = await expectRuntimeError(.upgradeRejected) {
                _ = try await Self.contact(endpoint, id, header: Self.payload().headerValue)
            }
            #expect(busy?.httpStatus == 409)
            #expect(busy?.description.contains("busy with another desktop") == true)

            try await desktop.send([1, 2, 3])  // buffered until the phone joins
            let phone = try await WebSocketTunnel.open(
                url: endpoint.url + TunnelServicePath.connect(routingID: push.routingID, tunnelID: push.tunnelID).path, timeout: .seconds(5))
            #expect(try await phone.receive(timeout: .seconds(5)) == [1, 2, 3])
            try await phone.send([4, 5])
            #expect(try await desktop.receive(timeout: .seconds(5)) == [4, 5])
            await phone.close()
            await desktop.close()
            await channel.close()
        }
    }

    @Test("the phone refuses a push: the desktop's tunnel closes with 1008 and the phone's reason")
    func refusalClosesTheDesktop() async throws {
        try await withRelay(Self.configuration) { _, endpoint in
            let token = Self.token("phone"), id = token.contactID
            let channel = try await Self.listen(endpoint, token)
            let desktop = try await Self.contact(endpoint, id, header: Self.payload().headerValue)
            let push = try PushMessage(bytes: try await channel.receive(timeout: .seconds(5)))
            try await channel.send(PushRefusal(tunnelID: push.tunnelID, reason: "unknown pairing ID").encoded)
            let error = await expectRuntimeError(.closed) { _ = try await desktop.receive(timeout: .seconds(5)) }
            #expect(error?.closeCode == .policyViolation)
            #expect(error?.description.contains("phone refused: unknown pairing ID") == true)
            await channel.close()
        }
    }

    @Test("a refusal marked revoked closes the desktop's tunnel with 4410; later contacts for that ID get 410")
    func revokedRefusal() async throws {
        try await withRelay(Self.configuration) { _, endpoint in
            let token = Self.token("unlinked-phone"), id = token.contactID
            let channel = try await Self.listen(endpoint, token)
            let desktop = try await Self.contact(endpoint, id, header: Self.payload().headerValue)
            let push = try PushMessage(bytes: try await channel.receive(timeout: .seconds(5)))
            try await channel.send(PushRefusal(tunnelID: push.tunnelID, reason: "contact ID revoked", revoked: true).encoded)
            let error = await expectRuntimeError(.closed) { _ = try await desktop.receive(timeout: .seconds(5)) }
            #expect(error?.closeCode == .contactRevoked)
            let gone = await expectRuntimeError(.upgradeRejected) {
                _ = try await Self.contact(endpoint, id, header: Self.payload().headerValue)
            }
            #expect(gone?.httpStatus == 410)
            await channel.close()
        }
    }

    @Test("push refusals: round trip with and without the revoked mark; key 3 other than true is malformed")
    func refusalEncoding() throws {
        let tunnelID = Array(repeating: UInt8(9), count: 16)
        for revoked in [false, true] {
            let refusal = PushRefusal(tunnelID: tunnelID, reason: "why", revoked: revoked)
            #expect(try PushRefusal(bytes: refusal.encoded) == refusal)
        }
        for bad: CBORValue in [
            [1: .bytes(tunnelID), 2: .text("why"), 3: .bool(false)],
            [1: .bytes(tunnelID), 2: .text("why"), 3: .unsigned(1)],
            [1: .bytes(tunnelID), 2: .text("why"), 4: .bool(true)],
        ] {
            #expect(throws: RuntimeError.self) { try PushRefusal(bytes: CBOR.encode(bad)) }
        }
    }

    @Test("a malformed push channel path, listen token or revoked header: 404 / 400")
    func listenValidation() async throws {
        try await withRelay(Self.configuration) { _, endpoint in
            let notFound = await expectRuntimeError(.upgradeRejected) {
                _ = try await WebSocketTunnel.open(url: endpoint.url + "/cable/listen/a", timeout: .seconds(5))
            }
            #expect(notFound?.httpStatus == 404)
            let token = Self.token("validation")
            // No token, a token of 31 bytes, a padded one, two of them.
            for value in [nil, Base64URL.encode([UInt8](repeating: 1, count: 31)), token.base64URL + "=", token.base64URL + "," + token.base64URL] {
                var options = WebSocketTunnel.Options()
                if let value { options.extraHeaders = [(PushChannel.listenTokenHeader, value)] }
                let refused = await expectRuntimeError(.upgradeRejected) {
                    _ = try await WebSocketTunnel.open(
                        url: endpoint.url + TunnelServicePath.listenPath(contactID: token.contactID), timeout: .seconds(5), options: options)
                }
                #expect(refused?.httpStatus == 400, "token header \(value ?? "missing")")
                #expect(refused?.description.contains(PushChannel.listenTokenHeader) == true)
            }
            // A revoked entry that is not a token, one of 33 bytes, and a header past 64 tokens
            // (refused before any parsing: a huge header costs no CPU or memory).
            for value in [
                "not base64url!",
                Base64URL.encode([UInt8](repeating: 9, count: 33)),
                Base64URL.encode([UInt8](repeating: 9, count: 400)),
                String(repeating: Base64URL.encode([UInt8](repeating: 9, count: 32)) + ",", count: 800),
            ] {
                let refused = await expectRuntimeError(.upgradeRejected) {
                    _ = try await Self.listen(endpoint, token, revoked: [value])
                }
                #expect(refused?.httpStatus == 400, "revoked header \(value.prefix(50))")
            }
        }
    }

    @Test("the phone is pushed the client payload's keys 1-3 only, re-encoded, whatever the desktop added")
    func pushCarriesCanonicalPayload() async throws {
        try await withRelay(Self.configuration) { _, endpoint in
            let token = Self.token("phone-extra"), id = token.contactID
            let channel = try await Self.listen(endpoint, token)
            let payload = Self.payload()
            var map = try #require(try CBOR.decode(payload.cbor).mapValue)
            map[9] = .bytes([UInt8](repeating: 0xEE, count: 2000))
            let desktop = try await Self.contact(endpoint, id, header: Hex.encode(CBOR.encode(.map(map)), uppercase: true))
            let push = try PushMessage(bytes: try await channel.receive(timeout: .seconds(5)))
            #expect(push.clientPayload == payload.cbor)
            await desktop.close()
            await channel.close()
        }
    }
}

/// Linked sign-ins through ``HybridHarness`` and the tamper cases, each with its specific error.
@Suite("Linked sign-ins (harness, loopback and in memory)", .serialized, .timeLimit(.minutes(2)))
struct LinkedHarnessTests {
    @Test("register by QR with linking, then two linked sign-ins over loopback and one in memory")
    func registerThenLinkedSignIns() async throws {
        let harness = try await HybridHarness.start()
        defer { Task { await harness.shutdown() } }
        let phone = LinkedPhone(name: "Pixel")
        let (credential, link) = try await harness.registerAndLink(on: phone, relyingParty: exampleRP, userName: "alice")
        #expect(link.name == "Pixel")
        #expect(link.contactID == phone.contactID)
        #expect(link.authenticatorPublicKey == phone.identityPublicKey)
        var known = credential
        for expected in 1...2 {
            known = try await harness.signInLinked(on: phone, link: link, relyingParty: exampleRP, knownCredentials: [known])
            #expect(known.signCount == UInt32(expected))
        }
        let ceremony = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
        let outcome = try await HybridHarness.transactLinkedInMemory(
            request: ceremony.requestBytes, hint: .getAssertion, phone: phone, link: link)
        #expect(try ceremony.verify(response: outcome.response, knownCredentials: [known]).credential.signCount == 3)
    }

    @Test("wrong pairing ID: the phone refuses, the desktop sees 1008 \"phone refused: unknown pairing ID\"; the passkey is untouched")
    func wrongPairingID() async throws {
        let harness = try await HybridHarness.start()
        defer { Task { await harness.shutdown() } }
        let phone = LinkedPhone()
        let (_, link) = try await harness.registerAndLink(on: phone, relyingParty: exampleRP, userName: "alice")
        var wrong = link
        wrong.pairingID = link.pairingID.map { $0 ^ 0xFF }
        let before = phone.phone.passkeys
        let ceremony = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
        do {
            _ = try await harness.transactLinked(request: ceremony.requestBytes, hint: .getAssertion, phone: phone, link: wrong)
            Issue.record("a wrong pairing ID was answered")
        } catch let error as TransactionError {
            #expect(error.runtimeCode == .closed)
            #expect("\(error)".contains("phone refused: unknown pairing ID"), "\(error)")
        }
        #expect(phone.phone.passkeys == before)
    }

    @Test("a replayed client payload is refused by the phone (and a fresh one still works)")
    func replayedPayload() async throws {
        let phone = LinkedPhone()
        let linking = phone.linkingIdentityForQR()
        let payload = ClientPayload(pairingID: linking.pairingID, clientNonce: RandomSource.system.bytes(16), requestType: .getAssertion)
        let push = PushMessage(tunnelID: RandomSource.system.bytes(16), routingID: [1, 2, 3], clientPayload: payload.cbor)
        _ = try phone.session(for: push)
        #expect(throws: LinkedPhone.Refusal.replayedClientPayload) { _ = try phone.session(for: push) }
        var fresh = payload
        fresh.clientNonce = RandomSource.system.bytes(16)
        _ = try phone.session(for: PushMessage(tunnelID: push.tunnelID, routingID: [1, 2, 3], clientPayload: fresh.cbor))
        #expect(throws: LinkedPhone.Refusal.malformedClientPayload) {
            _ = try phone.session(for: PushMessage(tunnelID: push.tunnelID, routingID: [1, 2, 3], clientPayload: [0xA0]))
        }
    }

    @Test("a replayed client payload over loopback: the second contact with the same header is refused with 1008")
    func replayedPayloadOverLoopback() async throws {
        var configuration = RelayConfiguration()
        configuration.contactWait = .seconds(2)
        let harness = try await HybridHarness.start(configuration: configuration)
        defer { Task { await harness.shutdown() } }
        let phone = LinkedPhone()
        let linking = phone.linkingIdentityForQR()
        let header = ClientPayload(pairingID: linking.pairingID, clientNonce: RandomSource.system.bytes(16), requestType: .getAssertion).headerValue
        let refusals = Recorder()
        let listener = Task {
            try await phone.listen(
                relayURL: harness.relayURL, proximity: try ProximityEndpoint(parsing: "udp://127.0.0.1:9"), count: 5,
                limit: .seconds(20), refusals: { refusals.append(Array($0.description.utf8)) })
        }
        defer { listener.cancel() }
        var options = WebSocketTunnel.Options()
        options.extraHeaders = [("X-caBLE-Client-Payload", header)]
        let url = harness.relayURL + TunnelServicePath.contact(contactID: linking.contactID).path
        let first = try await WebSocketTunnel.open(url: url, timeout: .seconds(5), options: options)
        // The phone checks the first payload (recording its nonce) and only then joins the tunnel; once
        // the relay counts the join, the nonce is known. Nobody answers the phone's advert here, so close it.
        #expect(await eventually { harness.relay.statistics.tunnelsJoined == 1 }, "the phone joined the first contact")
        await first.close()
        let second = try await WebSocketTunnel.open(url: url, timeout: .seconds(5), options: options)
        let error = await expectRuntimeError(.closed) { _ = try await second.receive(timeout: .seconds(5)) }
        #expect(error?.closeCode == .policyViolation)
        #expect(error?.description.contains("phone refused: replayed client payload") == true)
        #expect(refusals.messages.map { String(decoding: $0, as: UTF8.self) } == ["replayed client payload"])
    }

    @Test("the listening phone reconnects to a relay restarted on the same port and answers there (a desktop's embedded relay per run)")
    func reconnectsToARestartedRelay() async throws {
        let first = TunnelRelay()
        let port = try await first.start().port
        let harness = try await HybridHarness.start()
        defer { Task { await harness.shutdown() } }
        let phone = LinkedPhone()
        let (credential, link) = try await harness.registerAndLink(on: phone, relyingParty: exampleRP, userName: "alice")

        let relayURL = "ws://127.0.0.1:\(port)"
        let session = try LinkedClientSession(link: .init(link), requestType: .getAssertion)
        let scanner = ProximityScanner<[UInt8]>(matcher: ClientDriver.Transports.advertMatcher(eidKey: session.eidKey))
        let proximity = try await scanner.start()
        let listener = Task {
            try await phone.listen(relayURL: relayURL, proximity: proximity, count: 1, limit: .seconds(20))
        }
        defer { listener.cancel() }
        #expect(await eventually { first.statistics.openConnections == 1 }, "the phone's push channel is open")
        await first.shutdown()  // the desktop run that owned it ended; the phone's push channel dropped
        let second = TunnelRelay(port: port)
        try await second.start()
        #expect(await eventually { second.statistics.openConnections == 1 }, "the phone reconnected its push channel")
        let ceremony = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
        let outcome = try await LinkedClientDriver.run(
            session: session, request: ceremony.requestBytes,
            transports: .loopback(relayURL: relayURL, scanner: scanner), timeouts: .fast)
        #expect(try ceremony.verify(response: outcome.response, knownCredentials: [credential]).credential.signCount == 1)
        #expect(try await listener.value == 1)
        await scanner.stop()
        await second.shutdown()
    }

    @Test("after unlink the relay answers 410 for the old contact ID (the phone announces it as revoked)")
    func unlinkGivesGone() async throws {
        var configuration = RelayConfiguration()
        configuration.contactWait = .seconds(2)
        let harness = try await HybridHarness.start(configuration: configuration)
        defer { Task { await harness.shutdown() } }
        let phone = LinkedPhone()
        let (_, link) = try await harness.registerAndLink(on: phone, relyingParty: exampleRP, userName: "alice")
        phone.unlink()
        #expect(phone.revokedContactIDs == [link.contactID])
        let ceremony = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
        do {
            _ = try await harness.transactLinked(request: ceremony.requestBytes, hint: .getAssertion, phone: phone, link: link)
            Issue.record("a revoked link was answered")
        } catch let error as TransactionError {
            #expect(error.runtimeCode == .upgradeRejected)
            #expect((error.underlying as? RuntimeError)?.httpStatus == 410)
        }
    }
}
