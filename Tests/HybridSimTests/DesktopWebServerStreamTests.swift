import Foundation
@testable import HybridSim
import HybridTestSupport
import Synchronization
import Testing

/// `desktop --web`'s `/events` stream against clients that leave.
@Suite("desktop --web: the event stream", .timeLimit(.minutes(1)))
struct DesktopWebServerStreamTests {
    /// Polls `condition` every 20 ms for up to `limit`.
    private func eventually(within limit: Duration, _ condition: () -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }

    @Test("a client that leaves /events ends its stream at once, not at the stream's next 15 s wait")
    func leavingClientEndsItsStream() async throws {
        let events = DesktopWebEvents()
        events.append(DesktopWebServerHostTests.qrLine)  // the ceremony is still running: the stream waits
        let server = try await DesktopWebServer.start(events: events, port: 0)
        defer { events.finish() }
        let fd = try #require(LoopbackSocket.connect(port: server.port))
        try #require(LoopbackSocket.send(fd, "GET \(server.token.path)events HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\n\r\n"))
        #expect(try await eventually(within: .seconds(5)) { events.waitingStreams == 1 }, "the stream waits for the next event")
        close(fd)
        #expect(try await eventually(within: .seconds(3)) { events.waitingStreams == 0 }, "it ended when the client left")
        await server.stop()
    }

    @Test("each /events stream that opens is counted and announced; waitForStream returns once one opened, false at its timeout")
    func streamsOpenedAreCounted() async throws {
        let announced = Mutex<[Int]>([])
        let events = DesktopWebEvents { count in announced.withLock { $0.append(count) } }
        events.append(DesktopWebServerHostTests.qrLine)
        let server = try await DesktopWebServer.start(events: events, port: 0)
        defer { events.finish() }
        #expect(await events.waitForStream(timeout: .milliseconds(100)) == false, "nobody opened the stream")
        let page = try #require(LoopbackSocket.exchange(port: server.port, "GET \(server.token.path) HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\n\r\n"))
        #expect(page.status == 200)
        #expect(events.streamsOpened == 0, "the page itself is not a stream")
        async let opened = events.waitForStream(timeout: .seconds(10))
        var clients: [Int32] = []
        defer { for fd in clients { close(fd) } }
        for _ in 0..<2 {
            let fd = try #require(LoopbackSocket.connect(port: server.port))
            clients.append(fd)
            try #require(LoopbackSocket.send(fd, "GET \(server.token.path)events HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\n\r\n"))
        }
        #expect(await opened, "the waiter wakes when the first stream opens")
        #expect(try await eventually(within: .seconds(5)) { events.streamsOpened == 2 })
        #expect(announced.withLock { $0 } == [1, 2])
        await server.stop()
    }

    @Test("a wait whose timeout (or cancellation) ran before it registered resumes at once instead of waiting for a wake-up that already came")
    func expiredBeforeRegistering() async {
        let events = DesktopWebEvents()
        for what in [DesktopWebEvents.Waiting.streams, .events] {
            let id = UUID()
            #expect(events.expire(id, for: what) == nil, "nothing registered yet: the timeout marks it expired")
            await withCheckedContinuation { continuation in
                let now = events.register(id, continuation, for: what)
                #expect(now, "an expired wait does not register")
                // Resume it either way, so that the test ends.
                if now { continuation.resume() } else { events.expire(id, for: what)?.resume() }
            }
            // A wait that registered in time is the timeout's to resume.
            let late = UUID()
            await withCheckedContinuation { continuation in
                #expect(!events.register(late, continuation, for: what))
                events.expire(late, for: what)?.resume()
            }
        }
        // And through the public wait: cancelled at once, it returns false.
        let waiting = Task { await events.waitForStream(timeout: .seconds(60)) }
        waiting.cancel()
        #expect(await waiting.value == false)
    }

    @Test("a request not complete within the deadline ends its connection; a complete /events request streams past it")
    func requestDeadline() async throws {
        let events = DesktopWebEvents()
        events.append(DesktopWebServerHostTests.qrLine)
        let server = try await DesktopWebServer.start(events: events, port: 0, requestDeadline: .milliseconds(300))
        defer { events.finish() }
        let stream = try #require(LoopbackSocket.connect(port: server.port))
        defer { close(stream) }
        try #require(LoopbackSocket.send(stream, "GET \(server.token.path)events HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\n\r\n"))
        let start = ContinuousClock.now
        let half = try #require(LoopbackSocket.exchange(port: server.port, "GET / HTTP/1.1\r\nHost: 127.0.0.1"))
        #expect(half.response.hasPrefix("HTTP/1.1 408 Request Timeout\r\n"), "a partial head is answered 408: \(half.response)")
        #expect(half.closed, "closed by the server, not left to the client's 5 s")
        #expect(ContinuousClock.now - start < .seconds(4))
        try await Task.sleep(for: .milliseconds(600))  // twice the deadline since the stream's request
        #expect(events.waitingStreams == 1, "the stream whose request was complete is still open past the deadline")
        events.append(#"{"event":"advert","rssi":-45}"#)
        #expect(LoopbackSocket.receive(stream, until: "rssi").contains(#""rssi":-45"#), "and still delivers events")
        await server.stop()
    }

    @Test("past the connection cap a connection gets the relay's fixed 503 and ends")
    func connectionCap() async throws {
        let events = DesktopWebEvents()
        let server = try await DesktopWebServer.start(events: events, port: 0, maximumConnections: 1)
        defer { events.finish() }
        // A holder that sends nothing takes the only slot once the server's loop has counted it. The
        // server's two loops may count a second connection first, which then takes the slot (and the
        // holder gets the 503): then a new holder tries again.
        var answer: LoopbackSocket.Exchange?
        for attempt in 1...5 {
            let holder = try #require(LoopbackSocket.connect(port: server.port))
            defer { close(holder) }
            try await Task.sleep(for: .milliseconds(50 * attempt))
            answer = try #require(
                LoopbackSocket.exchange(port: server.port, "GET \(server.token.path) HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nConnection: close\r\n\r\n"))
            if answer?.status != 200 { break }
        }
        let refused = try #require(answer)
        #expect(refused.status == 503, "\(refused.response)")
        #expect(refused.response.contains("too many connections"))
        #expect(refused.closed)
        await server.stop()
    }

    @Test("a method other than GET or HEAD gets 405 with Allow: GET, HEAD (RFC 9110 §15.5.6); HEAD gets GET's head without the body, the stream's too")
    func otherMethodAllowsGet() async throws {
        try await DesktopWebServerHostTests.withServer { port, page in
            let exchange = try #require(
                LoopbackSocket.exchange(port: port, "POST \(page) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Length: 0\r\n\r\n"))
            let text = exchange.response
            #expect(text.hasPrefix("HTTP/1.1 405"), "\(text)")
            #expect(text.lowercased().contains("\r\nallow: get, head\r\n"), "\(text)")
            let get = try #require(LoopbackSocket.exchange(port: port, "GET \(page) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n"))
            let head = try #require(LoopbackSocket.exchange(port: port, "HEAD \(page) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n"))
            let getHead = try #require(get.response.components(separatedBy: "\r\n\r\n").first)
            #expect(head.response == getHead + "\r\n\r\n", "\(head.response)")
            #expect(head.response.contains("Content-Length: \(DesktopWebPage.html.utf8.count)\r\n"), "\(head.response)")
            // The stream's own head, nothing after it (no data, no chunk), in the client's version.
            for version in ["1.1", "1.0"] {
                let stream = try #require(
                    LoopbackSocket.exchange(port: port, "HEAD \(page)events HTTP/\(version)\r\nHost: 127.0.0.1:\(port)\r\n\r\n"))
                let parts = stream.response.components(separatedBy: "\r\n\r\n")
                #expect(parts.count == 2 && parts[1].isEmpty && stream.closed, "\(stream.response)")
                #expect(stream.response.hasPrefix("HTTP/\(version) 200") && stream.response.contains("Content-Type: text/event-stream\r\n"), "\(stream.response)")
                #expect(!stream.response.contains("X-Frame-Options") && !stream.response.lowercased().contains("content-length"), "\(stream.response)")
                #expect(stream.response.lowercased().contains("transfer-encoding: chunked") == (version == "1.1"), "\(stream.response)")
            }
        }
    }

    @Test("a request the parser cannot read gets 400 and the connection ends (it stayed open)")
    func malformedRequestCloses() async throws {
        try await DesktopWebServerHostTests.withServer { port, _ in
            let exchange = try #require(LoopbackSocket.exchange(port: port, "GARBAGE\r\n\r\n"))
            #expect(exchange.status == 400, "\(exchange.response)")
            #expect(exchange.closed)
        }
    }
}
