import CTAP2
import HybridCore
import HybridRuntime
import Synchronization
import Testing

/// How a listening phone rides out a relay that refuses for a while or drops its push channel at
/// once (a hostile-relay test found it gave up on one 502 and reconnected every 100 ms forever).
@Suite("Phone listener: retries and backoff", .serialized, .timeLimit(.minutes(1)))
struct PhoneListenerRetryTests {
    final class Events: Sendable {
        let all = Mutex<[String]>([])
        var handler: @Sendable (PhoneListener.Event) -> Void {
            { event in
                let name: String
                switch event {
                case .listening: name = "listening"
                case .unreachable(let reason, _, let cause): name = "unreachable (\(cause)): \(reason)"
                case .pushed: name = "pushed"
                case .ignored: name = "ignored"
                }
                self.all.withLock { $0.append(name) }
            }
        }
    }

    static func listen(
        _ port: Int, limit: Duration, connectTimeout: Duration = .seconds(5), keepalive: (after: Duration, answer: Duration)? = nil,
        stableAfter: Duration = .seconds(5), events: Events
    ) async -> (any Error)? {
        var configuration = PhoneListener.Configuration(
            relayURL: "ws://127.0.0.1:\(port)", listenToken: ListenToken(bytes: Array(repeating: 9, count: ListenToken.size))!)
        configuration.connectTimeout = connectTimeout
        configuration.stableAfter = stableAfter
        if let keepalive {
            configuration.keepaliveAfter = keepalive.after
            configuration.keepaliveAnswer = keepalive.answer
        }
        do {
            _ = try await PhoneListener.run(configuration, count: nil, limit: limit, events: events.handler) { _ in .answered }
            return nil
        } catch {
            return error
        }
    }

    @Test("408, 429, 500, 502, 503 and 504 are tried again with backoff, and the channel opens once the relay accepts; 400, 401, 403, 404 and 410 end the listener at once")
    func passingAndLastingRefusals() async throws {
        for status in [408, 429, 500, 502, 503, 504] {
            let attempts = Atomic<Int>(0)
            let server = try await ScriptedHTTPServer.start { request in
                // Two refusals, then a 101 that stays open.
                guard attempts.add(1, ordering: .relaxed).newValue > 2 else {
                    return Array("HTTP/1.1 \(status) Nope\r\nContent-Length: 0\r\n\r\n".utf8)
                }
                return Array(ScriptedHTTPServer.switching(request).utf8)
            }
            let events = Events()
            let error = await Self.listen(server.port, limit: .seconds(2), events: events)
            #expect((error as? RuntimeError)?.code == .timeout, "\(status): \(String(describing: error))")
            let seen = events.all.withLock { $0 }
            #expect(seen.filter { $0.hasPrefix("unreachable (refused)") }.count == 2 && seen.last == "listening", "\(status): \(seen)")
            await server.stop()
        }
        for status in [400, 401, 403, 404, 410] {
            let server = try await ScriptedHTTPServer.start { _ in Array("HTTP/1.1 \(status) No\r\nContent-Length: 0\r\n\r\n".utf8) }
            let start = ContinuousClock.now
            let error = await Self.listen(server.port, limit: .seconds(5), events: Events())
            #expect((error as? RuntimeError)?.httpStatus == status, "\(status): \(String(describing: error))")
            #expect(ContinuousClock.now - start < .seconds(2))
            await server.stop()
        }
    }

    @Test("the unreachable event names the way the channel failed: no connection, a relay that took it and never answered the upgrade (or closed it unanswered), an upgrade answered wrongly, a refusal for now; a malformed address ends the listener")
    func outageCauses() async throws {
        let closed = try await ScriptedHTTPServer.start { _ in [] }
        let closedPort = closed.port
        await closed.stop()
        let cases: [(PhoneListener.Outage, Bool, @Sendable (String) -> [UInt8])] = [
            (.unanswered, false, { _ in [] }),
            (.unanswered, true, { _ in [] }),  // closed without a word (a proxy with no backend)
            (.broken, false, { _ in Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n".utf8) }),
            (.broken, false, { _ in Array("SSH-2.0-OpenSSH_9.6\r\n".utf8) }),
            (.refused, false, { _ in Array("HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n".utf8) }),
        ]
        var outcomes: [(PhoneListener.Outage, [String])] = []
        let events = Events()
        _ = await Self.listen(closedPort, limit: .milliseconds(500), events: events)
        outcomes.append((.unreachable, events.all.withLock { $0 }))
        for (cause, closeAfter, respond) in cases {
            let server = try await ScriptedHTTPServer.start(closeAfter: closeAfter, respond)
            let events = Events()
            _ = await Self.listen(server.port, limit: .milliseconds(800), connectTimeout: .milliseconds(300), events: events)
            outcomes.append((cause, events.all.withLock { $0 }))
            await server.stop()
        }
        for (cause, seen) in outcomes {
            // The first attempt's (a last one cut short by the limit may time out instead).
            #expect(seen.first?.hasPrefix("unreachable (\(cause)): ") == true, "\(cause): \(seen)")
        }
        #expect(outcomes[1].1.first?.contains("WebSocket upgrade of /cable/listen timed out after 300 ms") == true, "\(outcomes)")
        let malformed = PhoneListener.Configuration(relayURL: "wss://127.0.0.1:1", listenToken: ListenToken(bytes: Array(repeating: 9, count: ListenToken.size))!)
        let start = ContinuousClock.now
        let error = await #expect(throws: RuntimeError.self) {
            _ = try await PhoneListener.run(malformed, count: nil, limit: .seconds(5)) { _ in .answered }
        }
        #expect(error?.code == .invalidAddress && ContinuousClock.now - start < .seconds(1), "\(String(describing: error))")
        #expect(outcomes[2].1.first?.contains("WebSocket upgrade of /cable/listen failed: the server closed the connection without answering") == true,
                "\(outcomes)")
    }

    @Test("a relay that accepts and at once closes: the backoff grows to its cap (not a reconnect every 100 ms), the drop is reported once, and the open once at the start")
    func flappingChannelBacksOff() async throws {
        let attempts = Atomic<Int>(0)
        let server = try await ScriptedHTTPServer.start(closeAfter: true) { request in
            attempts.add(1, ordering: .relaxed)
            return Array(ScriptedHTTPServer.switching(request).utf8)
        }
        let events = Events()
        let error = await Self.listen(server.port, limit: .seconds(3), events: events)
        #expect((error as? RuntimeError)?.code == .timeout, "\(String(describing: error))")
        // 100 + 200 + 400 + 800 + 1000 ms of pauses fill 2.5 s: about 6 attempts in 3 s (30 at a fixed 100 ms).
        let count = attempts.load(ordering: .relaxed)
        #expect((4...8).contains(count), "\(count) connections in 3 s")
        let seen = events.all.withLock { $0 }
        #expect(seen.first == "listening" && seen.filter { $0 == "listening" }.count == 1, "\(seen)")
        let drops = seen.filter { $0.hasPrefix("unreachable") }
        #expect(drops.count == 1 && drops[0].contains("after the push channel opened; reconnecting with backoff"), "\(seen)")
        #expect(drops.first?.hasPrefix("unreachable (lost): ") == true, "\(seen)")
        await server.stop()
    }

    @Test("a push channel that goes silent without closing (a NAT entry dropped) gets a ping, and is opened again when nothing answers it")
    func silentChannelIsNoticed() async throws {
        // A 101, then nothing at all: no pong, no close.
        let server = try await ScriptedHTTPServer.start { request in Array(ScriptedHTTPServer.switching(request).utf8) }
        let events = Events()
        let error = await Self.listen(server.port, limit: .seconds(3), keepalive: (.milliseconds(300), .milliseconds(300)), events: events)
        #expect((error as? RuntimeError)?.code == .timeout, "\(String(describing: error))")
        let seen = events.all.withLock { $0 }
        #expect(
            seen.contains { $0.hasPrefix("unreachable (lost): the push channel went silent: nothing from the relay for ") },
            "\(seen)")
        #expect(server.receivedRequests.count >= 2, "the channel was opened again: \(server.receivedRequests.count) request(s)")
        #expect(server.receivedAfterRequests.first == 0x89, "a ping (FIN, opcode 9) went out")
        await server.stop()
    }

    @Test("a relay that takes every channel and then drops everything: the silence is reported once, and the channels after it are not reported listening until the relay is heard on one")
    func blackHoleIsNotListening() async throws {
        // Connections 1 to 3 are black holes (a 101, then nothing); from the 4th the relay answers pings.
        let server = try await ScriptedHTTPServer.start(reply: { connection, bytes in
            connection >= 4 && bytes.first == 0x89 ? [0x8A, 0x00] : []
        }) { request in Array(ScriptedHTTPServer.switching(request).utf8) }
        let events = Events()
        // Each channel stays open longer than `stableAfter` before its silence is judged: without
        // the proof, every reopened black hole was "listening" again, then lost again.
        let error = await Self.listen(
            server.port, limit: .seconds(6), keepalive: (.milliseconds(300), .milliseconds(400)), stableAfter: .milliseconds(100),
            events: events)
        #expect((error as? RuntimeError)?.code == .timeout, "\(String(describing: error))")
        let seen = events.all.withLock { $0 }
        #expect(server.receivedRequests.count >= 4, "\(server.receivedRequests.count) request(s): \(seen)")
        #expect(
            seen.count == 3 && seen[0] == "listening" && seen[2] == "listening"
                && seen[1].hasPrefix("unreachable (lost): the push channel went silent")
                && seen[1].hasSuffix("reported listening again once the relay answers on a new channel"),
            "\(seen)")
        await server.stop()
    }

    @Test("a push channel whose relay answers the pings stays open, however long it is idle")
    func answeredPingsKeepTheChannel() async throws {
        try await withRelay { _, endpoint in
            let events = Events()
            let port = try #require(Int(endpoint.url.split(separator: ":").last ?? ""))
            // A ping every quarter second or so, each with 2 s for its pong (not a race with the
            // listener's 250 ms slices on a loaded machine); a ping with no pong would be a loss.
            let error = await Self.listen(port, limit: .seconds(4), keepalive: (.milliseconds(200), .seconds(2)), events: events)
            #expect((error as? RuntimeError)?.code == .timeout, "\(String(describing: error))")
            #expect(events.all.withLock { $0 } == ["listening"])
        }
    }
}
