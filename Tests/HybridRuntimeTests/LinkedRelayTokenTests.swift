import CTAP2
import HybridCore
import HybridRuntime
import Logging
import Synchronization
import Testing

/// The push channel's proof and revocations: only the holder of the listen token (whose SHA-256 is
/// the contact ID) may listen or revoke; a revocation sent to the revoked ID itself holds on that
/// relay (how it reaches the old ID's instance behind a proxy), and `PhoneListener` sends them.
extension LinkedRelayTests {
    @Test("holding a contact ID (as every linked desktop does) is not enough to listen in the phone's place: 403")
    func listenNeedsTheToken() async throws {
        try await withRelay(Self.configuration) { _, endpoint in
            let phone = Self.token("the phone"), desktop = Self.token("a linked desktop")
            let channel = try await Self.listen(endpoint, phone)
            // The desktop knows the phone's contact ID and presents its own (valid) token for it.
            let error = await expectRuntimeError(.upgradeRejected) {
                _ = try await Self.listen(endpoint, desktop, contactID: phone.contactID)
            }
            #expect(error?.httpStatus == 403)
            #expect(error?.description.contains("the listen token is not this contact ID's") == true)
            // The contact ID itself, presented as the token, is not one either.
            let asToken = try #require(ListenToken(bytes: phone.contactID))
            let again = await expectRuntimeError(.upgradeRejected) {
                _ = try await Self.listen(endpoint, asToken, contactID: phone.contactID)
            }
            #expect(again?.httpStatus == 403)
            // The phone's channel was not replaced: the next contact reaches it.
            let desktopTunnel = try await Self.contact(endpoint, phone.contactID, header: Self.payload().headerValue)
            let push = try PushMessage(bytes: try await channel.receive(timeout: .seconds(5)))
            #expect(push.routingID.count == 3)
            await desktopTunnel.close()
            await channel.close()
        }
    }

    @Test("announcing a phone's contact ID as revoked without its token revokes nothing: the phone is still reached")
    func revocationNeedsTheToken() async throws {
        try await withRelay(Self.configuration) { _, endpoint in
            let phone = Self.token("the phone"), squatter = Self.token("a linked desktop")
            let channel = try await Self.listen(endpoint, phone)
            // The contact ID is 32 bytes, so it parses as a token: its hash is revoked, not the ID.
            let squatting = try await Self.listen(endpoint, squatter, revoked: [Base64URL.encode(phone.contactID)])
            let desktop = try await Self.contact(endpoint, phone.contactID, header: Self.payload().headerValue)
            _ = try PushMessage(bytes: try await channel.receive(timeout: .seconds(5)))
            await desktop.close()
            // Announced with the token, it is revoked at once.
            let unlinked = try await Self.listen(endpoint, Self.token("the phone, rotated"), revoked: [phone.base64URL])
            let gone = await expectRuntimeError(.upgradeRejected) {
                _ = try await Self.contact(endpoint, phone.contactID, header: Self.payload().headerValue)
            }
            #expect(gone?.httpStatus == 410)
            await unlinked.close()
            await squatting.close()
            await channel.close()
        }
    }

    @Test("a listen on a revoked ID naming itself revoked (how a phone reaches the old ID's instance behind a proxy): 410, and the revocation holds, even for a contact already waiting")
    func revocationSentToTheOldID() async throws {
        var configuration = Self.configuration
        configuration.contactWait = .seconds(8)  // an answer well before this proves it did not wait
        try await withRelay(configuration) { relay, endpoint in
            let old = Self.token("revoked elsewhere")
            let first = try await Self.listen(endpoint, old)  // this instance knows the phone
            await first.close()
            #expect(await eventually { relay.statistics.openConnections == 0 })
            let start = ContinuousClock.now
            async let waiting: Int? = {
                let error = await expectRuntimeError(.upgradeRejected) {
                    _ = try await Self.contact(endpoint, old.contactID, header: Self.payload().headerValue)
                }
                return error?.httpStatus
            }()
            #expect(await eventually { relay.statistics.waitingContacts == 1 }, "the contact waits for its phone")
            let refused = await expectRuntimeError(.upgradeRejected) {
                _ = try await Self.listen(endpoint, old, revoked: [old.base64URL])
            }
            #expect(refused?.httpStatus == 410)
            #expect(await waiting == 410, "the waiting contact is answered 410, not 504 after the wait")
            #expect(relay.statistics.revocationsReceived == 1, "the phone's listen was a receipt")
            #expect(relay.statistics.rejectedRequests[410] == 1, "the desktop's 410 is a refusal")
            #expect(ContinuousClock.now - start < .seconds(4))
            let later = await expectRuntimeError(.upgradeRejected) {
                _ = try await Self.contact(endpoint, old.contactID, header: Self.payload().headerValue)
            }
            #expect(later?.httpStatus == 410)
            #expect(later?.description.contains("contact ID revoked") == true)
        }
    }

    @Test("PhoneListener sends each revoked token to its own ID once per run, after its channel opened")
    func listenerSendsRevocations() async throws {
        try await withRelay(Self.configuration) { relay, endpoint in
            let revoked = [Self.token("first revoked"), Self.token("second revoked")]
            let configuration = PhoneListener.Configuration(
                relayURL: endpoint.url, listenToken: Self.token("current"), revoked: revoked)
            let listener = Task {
                try await PhoneListener.run(configuration, count: nil, limit: .seconds(20)) { _ in .answered }
            }
            defer { listener.cancel() }
            #expect(await eventually(timeout: .seconds(5)) { relay.statistics.revocationsReceived == 2 }, "one per revoked token")
            try await Task.sleep(for: .milliseconds(300))
            #expect(relay.statistics.revocationsReceived == 2, "sent once, not on every wait")
            #expect(relay.statistics.rejectedRequests[410] == nil, "receipts, not refusals")
            for token in revoked {
                let gone = await expectRuntimeError(.upgradeRejected) {
                    _ = try await Self.contact(endpoint, token.contactID, header: Self.payload().headerValue)
                }
                #expect(gone?.httpStatus == 410)
            }
        }
    }

    @Test("a listener replaced by a newer one for the same contact ID stops (PhoneListener.Replaced) instead of taking it back")
    func replacedListenerStops() async throws {
        try await withRelay(Self.configuration) { relay, endpoint in
            let configuration = PhoneListener.Configuration(relayURL: endpoint.url, listenToken: Self.token("listened twice"))
            let listening = Mutex(0)
            let first = Task {
                try await PhoneListener.run(
                    configuration, count: nil, limit: .seconds(5),
                    events: { if case .listening = $0 { listening.withLock { $0 += 1 } } }) { _ in .answered }
            }
            #expect(await eventually { listening.withLock { $0 } == 1 }, "the first listener is on")
            let second = Task { try await PhoneListener.run(configuration, count: nil, limit: .seconds(20)) { _ in .answered } }
            defer { second.cancel() }
            let ended: Result<Int, any Error> = await first.result
            guard case .failure(let error as PhoneListener.Replaced) = ended else {
                Issue.record("the replaced listener did not stop with Replaced: \(ended)")
                return
            }
            #expect(error.description.contains("another listener took over this contact ID"))
            #expect(listening.withLock { $0 } == 1, "it never reconnected")
            // The second one keeps the channel: a contact reaches it.
            let desktop = try await Self.contact(endpoint, configuration.contactID, header: Self.payload().headerValue)
            await desktop.close()
        }
    }

    @Test("a listener replaced while it was not reading (frozen, or in a transaction) stops at the queued close: the pushes that waited for it went to the newer listener and are not handled twice")
    func replacedListenerSkipsQueuedPushes() async throws {
        try await withRelay(Self.configuration) { _, endpoint in
            let configuration = PhoneListener.Configuration(relayURL: endpoint.url, listenToken: Self.token("frozen, then woke"))
            let firstHandled = Mutex<[[UInt8]]>([]), secondHandled = Mutex<[[UInt8]]>([])
            let release = AsyncStream<Void>.makeStream()
            let first = Task {
                try await PhoneListener.run(configuration, count: nil, limit: .seconds(10)) { push in
                    firstHandled.withLock { $0.append(push.tunnelID) }
                    // Busy with the first push (as a frozen process): what comes meanwhile waits.
                    for await _ in release.stream { break }
                    return .failed("held by the test")
                }
            }
            defer { first.cancel() }
            let one = try await Self.contact(endpoint, configuration.contactID, header: Self.payload().headerValue)
            #expect(await eventually { firstHandled.withLock { $0.count } == 1 }, "the first push reached the first listener")
            // That desktop gives up; the next one's push waits, unread, in the busy listener's channel
            // (the relay has one contact request per phone at a time: 409 until the first is gone).
            await one.close()
            var waiting: WebSocketTunnel?
            for _ in 0..<100 where waiting == nil {
                waiting = try? await Self.contact(endpoint, configuration.contactID, header: Self.payload().headerValue)
                if waiting == nil { try await Task.sleep(for: .milliseconds(20)) }
            }
            let two = try #require(waiting, "a second desktop reached the phone")
            // The newer listener takes the contact ID; the relay sends it the push nobody joined.
            let second = Task {
                try await PhoneListener.run(configuration, count: 1, limit: .seconds(10)) { push in
                    secondHandled.withLock { $0.append(push.tunnelID) }
                    return .answered
                }
            }
            #expect(try await second.value == 1)
            // The relay closed the replaced channel before it sent the pushes again; give that close
            // time to reach the first listener's inbox (loopback: well within this).
            try await Task.sleep(for: .milliseconds(200))
            release.continuation.finish()
            let ended: Result<Int, any Error> = await first.result
            guard case .failure(let error as PhoneListener.Replaced) = ended else {
                Issue.record("the replaced listener did not stop with Replaced: \(ended)")
                return
            }
            #expect(error.answered == 0)
            #expect(firstHandled.withLock { $0.count } == 1, "the push that waited in the replaced channel was not handled")
            #expect(secondHandled.withLock { $0.count } == 1)
            await two.close()
        }
    }

    @Test("a listener whose token the phone revoked meanwhile (isCurrent false) closes its channel and throws ContactRevoked while idle")
    func listenerNoticesItsRevokedToken() async throws {
        try await withRelay(Self.configuration) { relay, endpoint in
            let current = Mutex(true)
            let listening = Mutex(0)
            var configuration = PhoneListener.Configuration(relayURL: endpoint.url, listenToken: Self.token("rotated away"))
            configuration.isCurrent = { current.withLock { $0 } }
            let listener = Task {
                try await PhoneListener.run(
                    configuration, count: nil, limit: .seconds(20),
                    events: { if case .listening = $0 { listening.withLock { $0 += 1 } } }) { _ in .answered }
            }
            defer { listener.cancel() }
            #expect(await eventually { listening.withLock { $0 } == 1 }, "the listener is on")
            let revokedAt = ContinuousClock.now
            current.withLock { $0 = false }
            let ended: Result<Int, any Error> = await listener.result
            guard case .failure(let error as PhoneListener.ContactRevoked) = ended else {
                Issue.record("the listener did not stop with ContactRevoked: \(ended)")
                return
            }
            #expect(error.answered == 0)
            #expect(ContinuousClock.now - revokedAt < .seconds(2), "noticed within a wait slice, not at the time limit")
            #expect(await eventually { relay.statistics.openConnections == 0 }, "its push channel was closed")
        }
    }

    @Test("sendRevocations: each token answered 410 is delivered; what got no answer is returned for the next try")
    func revocationsNotDeliveredAreKept() async throws {
        let tokens = [Self.token("newest"), Self.token("older")]
        let closed = try await withRelay(Self.configuration) { _, endpoint in endpoint.url }  // nothing listens there now
        #expect(await PhoneListener.sendRevocations(tokens, relayURL: closed, within: .seconds(2), logger: Logger(label: "t")) == tokens)
        try await withRelay(Self.configuration) { relay, endpoint in
            #expect(await PhoneListener.sendRevocations(tokens, relayURL: endpoint.url, within: .seconds(2), logger: Logger(label: "t")).isEmpty)
            #expect(relay.statistics.revocationsReceived == 2)
        }
        // A relay that knows no revocations takes the listen (101): nothing to retry there, but not
        // a relay that now answers 410 either (what `phone --unlink --relay` reports).
        let taking = try await ScriptedHTTPServer.start(closeAfter: true) { Array(ScriptedHTTPServer.switching($0).utf8) }
        let url = "ws://127.0.0.1:\(taking.port)"
        #expect(await PhoneListener.sendRevocations(tokens, relayURL: url, within: .seconds(2), logger: Logger(label: "t")).isEmpty)
        #expect(await PhoneListener.sendRevocations(
            tokens, relayURL: url, within: .seconds(2), acceptedIsDelivered: false, logger: Logger(label: "t")) == tokens)
        await taking.stop()
    }

    @Test("PhoneListener retries a revocation the relay did not answer after its next reconnection, and stops once it got 410")
    func listenerRetriesUndeliveredRevocations() async throws {
        let current = Self.token("the phone, rotated"), revoked = Self.token("the phone")
        let currentPath = TunnelServicePath.listenPath(contactID: current.contactID)
        let revokedPath = TunnelServicePath.listenPath(contactID: revoked.contactID)
        let revocationAnswers = Mutex<[Int]>([])
        // The push channel is taken and dropped at once (so the listener keeps reconnecting); the
        // revoked ID's first revocation gets a 503, every later one a 410.
        let server = try await ScriptedHTTPServer.start(closeAfter: true) { head in
            let target = head.split(separator: " ").dropFirst().first.map(String.init) ?? ""
            if target == revokedPath {
                let status = revocationAnswers.withLock { answers in
                    answers.append(answers.isEmpty ? 503 : 410)
                    return answers.last!
                }
                return Array("HTTP/1.1 \(status) Refused\r\nContent-Length: 0\r\n\r\n".utf8)
            }
            return Array(ScriptedHTTPServer.switching(head).utf8)
        }
        var configuration = PhoneListener.Configuration(
            relayURL: "ws://127.0.0.1:\(server.port)", listenToken: current, revoked: [revoked])
        configuration.initialBackoff = .milliseconds(20)
        let listener = Task {
            try await PhoneListener.run(configuration, count: nil, limit: .seconds(20)) { _ in .answered }
        }
        func listens() -> Int {
            server.receivedRequests.filter { $0.hasPrefix("GET \(currentPath) ") }.count
        }
        // Enough reconnections for a third revocation if the delivered one were sent again.
        let deadline = ContinuousClock.now + .seconds(10)
        while listens() < 6, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        listener.cancel()
        _ = await listener.result
        await server.stop()
        #expect(listens() >= 6, "the listener did not keep reconnecting")
        #expect(revocationAnswers.withLock { $0 } == [503, 410], "the 503'd revocation is sent again once, and not after its 410")
        // Each revocation proves the revoked ID with its own token and names it revoked.
        for head in server.receivedRequests where head.hasPrefix("GET \(revokedPath) ") {
            #expect(ScriptedHTTPServer.header(PushChannel.listenTokenHeader, in: head) == revoked.base64URL)
            #expect(ScriptedHTTPServer.header(PushChannel.revokedHeader, in: head) == revoked.base64URL)
        }
    }
}
