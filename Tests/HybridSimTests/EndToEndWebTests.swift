import Foundation
import HybridTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `desktop --web` as a browser sees it: the page, the QR code, and the event stream that drives
/// it, for a registration and a sign-in with the phone, and the error state.
@Suite("End to end: desktop --web", .serialized, .timeLimit(.minutes(2)))
struct EndToEndWebTests {
    static func get(_ url: String) async throws -> (status: Int, type: String, body: String) {
        var request = URLRequest(url: try #require(URL(string: url)))
        request.timeoutInterval = 30
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        return (http.statusCode, http.value(forHTTPHeaderField: "Content-Type") ?? "", String(decoding: data, as: UTF8.self))
    }

    /// The page URL the desktop printed on stderr.
    static func pageURL(_ desktop: ChildProcess) async throws -> String {
        let lines = try await desktop.waitForOutput("web page line", in: \.standardError) { $0.contains { $0.hasPrefix("web page: ") } }
        return String(try #require(lines.first { $0.hasPrefix("web page: ") }).dropFirst("web page: ".count))
    }

    /// The port and the path (`/s/TOKEN/`) of a printed page URL `http://127.0.0.1:PORT/s/TOKEN/`,
    /// checked to have that shape: a token of 32 base64url characters.
    static func pagePath(_ url: String) throws -> (port: Int, path: String) {
        let match = try #require(url.wholeMatch(of: /http:\/\/127\.0\.0\.1:([0-9]+)(\/s\/[A-Za-z0-9_-]{32}\/)/), "\(url)")
        return (try #require(Int(match.1)), String(match.2))
    }

    /// The `data:` payloads of a finished event stream.
    static func events(_ body: String) throws -> [[String: Any]] {
        try body.split(separator: "\n").filter { $0.hasPrefix("data: ") }.map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.dropFirst(6).utf8)) as? [String: Any])
        }
    }

    @Test func registrationAndSignInPages() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        for request in ["mc", "ga"] {
            let desktop = try await lab.startDesktop(["--request", request, "--web", "--web-port", "0"], json: true)
            let page = try await Self.pageURL(desktop.process)
            let html = try await Self.get(page)
            #expect(html.status == 200 && html.type.hasPrefix("text/html"))
            #expect(html.body.contains("new EventSource(\"events\")"))
            let qr = try await Self.get(page + "qr.svg")
            #expect(qr.status == 200 && qr.type == "image/svg+xml" && qr.body.contains("<svg"))
            // Another local user, without the printed address's token, gets nothing of the ceremony
            // (the QR code is up: its FIDO:/ URL is in the stream).
            let port = try Self.pagePath(page).port
            for path in ["/", "/events", "/qr.svg"] {
                let refused = try await Self.get("http://127.0.0.1:\(port)\(path)")
                #expect(refused.status == 403 && !refused.body.contains("FIDO:/") && !refused.body.contains("<svg"), "\(path): \(refused.body)")
            }

            let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url])
            // The stream replays everything and ends after the last event.
            let stream = try await Self.get(page + "events")
            #expect(stream.type == "text/event-stream")
            let names = try Self.events(stream.body).compactMap { $0["event"] as? String }
            #expect(names == ["qr", "advert", "connected", "handshake", "request", "response", "result"], "\(stream.body)")
            let result = try #require(try Self.events(stream.body).last)
            #expect(result["rpCheck"] as? String == "verified")
            #expect((result["credential"] as? [String: Any])?["type"] as? String == "public-key")
            #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)\n\(phone.transcript)")
            #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")
        }
    }

    @Test func errorState() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let desktop = try await lab.startDesktop(["--request", "ga", "--web", "--web-port", "0", "--timeout", "4"], json: true)
        let page = try await Self.pageURL(desktop.process)
        let missing = try await Self.get(page + "nothing-here")
        #expect(missing.status == 404)
        let stream = try await Self.get(page + "events")
        let last = try #require(try Self.events(stream.body).last)
        #expect(last["event"] as? String == "error")
        #expect(last["exitCode"] as? Int == 3)
        #expect(try await desktop.process.waitForExit() == 3, "\(desktop.process.transcript)")
    }

    @Test("Ctrl-C while a page is open: its stream ends with the interrupted error event, not cut; exit 130")
    func interruptedPage() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let desktop = try await lab.startDesktop(["--request", "ga", "--web", "--web-port", "0"], json: true)
        let (port, path) = try Self.pagePath(try await Self.pageURL(desktop.process))
        // A page's stream, read raw: the signal goes only once the stream has delivered its first
        // event, so the page is known to be listening.
        let fd = try #require(LoopbackSocket.connect(port: port, ioTimeout: 15))
        defer { close(fd) }
        #expect(LoopbackSocket.send(fd, "GET \(path)events HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n"))
        let head = LoopbackSocket.receive(fd, until: "data: ")
        #expect(head.contains("text/event-stream"), "\(head)")
        desktop.process.signal(SIGINT)
        let body = head + LoopbackSocket.receive(fd, until: "\"kind\":\"interrupted\"")
        // (Swift reads "\r\n", the chunk framing, as one character: split on both.)
        let events = try body.split(whereSeparator: \.isNewline).filter { $0.hasPrefix("data: ") }.map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.dropFirst(6).utf8)) as? [String: Any])
        }
        #expect(events.first?["event"] as? String == "qr", "\(body)")
        let last = try #require(events.last)
        #expect(last["event"] as? String == "error" && last["kind"] as? String == "interrupted", "\(body)")
        #expect(last["exitCode"] as? Int == 130)
        #expect(try await desktop.process.waitForExit() == 130, "\(desktop.process.transcript)")
        #expect(desktop.process.standardOutput.lines.last?.contains("\"kind\":\"interrupted\"") == true)
    }

    @Test("a given --web-port that is taken: exit 6, the error line, and the error event as the last stdout line")
    func givenPortTaken() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let holder = try EndToEndLab.boundSocket(listening: true)
        defer { close(holder.fd) }
        let desktop = try lab.start(
            "desktop-web-taken",
            ["desktop", "--request", "ga", "--web", "--web-port", "\(holder.port)", "--relay-port", "0", "--proximity-port", "0"])
        #expect(try await desktop.waitForExit() == 6, "\(desktop.transcript)")
        #expect(FailureOutput.singleErrorLine(desktop).hasPrefix("error: cannot serve the web page on 127.0.0.1:\(holder.port)"))
        let last = try #require(try desktop.standardOutput.lines.map(JSONEvents.parse).last)
        #expect(last["event"] as? String == "error")
        #expect(last["exitCode"] as? Int == 6)
    }

    @Test("the default --web-port taken (rp's default is the same, 47003): a free port with a note, and the page serves")
    func defaultPortTaken() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        // Something else may hold 47003 already; either way the default is taken during the run.
        let holder = try? EndToEndLab.boundSocket(listening: true, port: 47003)
        defer { if let holder { close(holder.fd) } }
        let desktop = try await lab.startDesktop(["--request", "ga", "--web", "--timeout", "4"], json: true)
        let page = try await Self.pageURL(desktop.process)
        #expect(try Self.pagePath(page).port != 47003, "\(page)")
        #expect(desktop.process.standardError.lines.contains("note: port 47003 is in use; serving the web page on a free port instead"))
        #expect(try await Self.get(page).status == 200)
        #expect(try await desktop.process.waitForExit() == 3, "\(desktop.process.transcript)")
    }
}
