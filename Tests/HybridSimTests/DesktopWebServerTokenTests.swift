import Foundation
import HybridCore
import HybridSim
import HybridTestSupport
import Synchronization
import Testing

/// `desktop --web` and `demo --web` answer only requests that carry the page's token in their path
/// (`/s/TOKEN/`): any local program reaches 127.0.0.1, and without the token another user of the
/// machine read the `FIDO:/` URL from the event stream and finished the ceremony with his own phone.
@Suite("desktop --web: the page's token", .serialized, .timeLimit(.minutes(1)))
struct DesktopWebServerTokenTests {
    /// The refusals a server reported.
    final class Refusals: Sendable {
        let lines = Mutex<[String]>([])
    }

    /// A live ceremony's stream (its QR code shown, no last event yet) served on a free port for
    /// `body`, with the server and the refusals it reported.
    static func withServer(_ body: (DesktopWebServer, DesktopWebEvents, Refusals) async throws -> Void) async throws {
        let refused = Refusals()
        let events = DesktopWebEvents(onRefused: { line in refused.lines.withLock { $0.append(line) } })
        events.append(DesktopWebServerHostTests.qrLine)
        let server = try await DesktopWebServer.start(events: events, port: 0)
        do {
            try await body(server, events, refused)
        } catch {
            events.finish()
            await server.stop()
            throw error
        }
        events.finish()
        await server.stop()
    }

    /// `method path` with the right `Host`, as a local program sends it.
    static func request(_ path: String, port: Int, method: String = "GET") throws -> (status: Int, response: String) {
        let exchange = try #require(
            LoopbackSocket.exchange(port: port, "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Length: 0\r\n\r\n", ioTimeout: 10),
            "cannot connect to 127.0.0.1:\(port)")
        return (exchange.status, exchange.response)
    }

    @Test("without the token every path is 403 with one plain line and nothing of the ceremony, opens no stream, and is reported")
    func noTokenRefused() async throws {
        try await Self.withServer { server, events, refused in
            let port = server.port
            let token = server.token.text
            let paths = [
                "/", "/events", "/qr.svg", "/index.html", "/s/", "/s/events", "/s//events", "*",
                "/events?token=\(token)", "/?token=\(token)", "/\(token)/events", "/S/\(token)/events", "/s/%2E/events",
            ]
            for path in paths {
                for method in ["GET", "HEAD", "POST"] {
                    let (status, response) = try Self.request(path, port: port, method: method)
                    #expect(status == 403, "\(method) \(path): \(response)")
                    #expect(response.contains("Content-Type: text/plain"), "\(method) \(path): \(response)")
                    #expect(!response.contains("FIDO:/") && !response.contains("<svg") && !response.contains("<html"), "\(method) \(path): \(response)")
                    #expect(!response.contains(token), "\(method) \(path): the answer gives the token away: \(response)")
                    if method == "GET" {
                        let reason = DesktopWebServerHostTests.body(response)
                        #expect(reason.hasSuffix("open the address the program printed on stderr (web page: http://127.0.0.1:PORT/s/TOKEN/)\n"), "\(path): \(reason)")
                        #expect(reason.filter { $0 == "\n" }.count == 1, "one line: \(reason)")
                    }
                }
            }
            #expect(events.streamsOpened == 0, "a request without the token opened the stream")
            try await DesktopWebServerHostTests.waitForReports(refused.lines, count: paths.count * 3)
            let lines = refused.lines.withLock { $0 }
            #expect(lines.count == paths.count * 3, "\(lines)")
            #expect(lines.first == "GET /: 403 this page needs its token in the path: open the address the program printed on stderr (web page: http://127.0.0.1:PORT/s/TOKEN/)", "\(lines)")
        }
    }

    @Test("a wrong token is refused like none: one character changed, cut short, made longer, in another case")
    func wrongTokenRefused() async throws {
        try await Self.withServer { server, events, _ in
            let port = server.port
            let token = Array(server.token.text)
            var changed = token
            changed[token.count / 2] = changed[token.count / 2] == "A" ? "B" : "A"
            var last = token
            last[token.count - 1] = last[token.count - 1] == "A" ? "B" : "A"
            let text = String(token)
            let otherCase = text.uppercased() == text ? text.lowercased() : text.uppercased()
            let guesses = [String(changed), String(last), String(token.dropLast()), text + "A", otherCase]
            for guess in guesses where guess != text {
                for resource in ["", "events", "qr.svg"] {
                    let (status, response) = try Self.request("/s/\(guess)/\(resource)", port: port)
                    #expect(status == 403, "\(guess)/\(resource): \(response)")
                    #expect(!response.contains("FIDO:/") && !response.contains("<svg") && !response.contains("<html"), "\(guess)/\(resource): \(response)")
                    #expect(DesktopWebServerHostTests.body(response).hasPrefix("not this page's token: "), "\(response)")
                }
            }
            #expect(events.streamsOpened == 0)
        }
    }

    @Test("with the token: the page, its stream and QR code; /s/TOKEN alone is redirected to /s/TOKEN/; other paths below it are 404")
    func rightTokenServed() async throws {
        try await Self.withServer { server, events, refused in
            let port = server.port
            let page = server.token.path
            #expect(server.url == "http://127.0.0.1:\(port)\(page)")
            let html = try Self.request(page, port: port)
            #expect(html.status == 200 && html.response.contains("new EventSource(\"events\")"), "\(html.response)")
            #expect(html.response.contains("img\").src = \"qr.svg\""), "the page's URLs are relative, so they carry the token")
            let query = try Self.request(page + "?from=bookmark", port: port)
            #expect(query.status == 200, "\(query.response)")
            let qr = try Self.request(page + "qr.svg", port: port)
            #expect(qr.status == 200 && qr.response.contains("<svg"), "\(qr.response)")
            let slashless = try Self.request(String(page.dropLast()), port: port)
            #expect(slashless.status == 308 && slashless.response.contains("\r\nLocation: \(page)\r\n"), "\(slashless.response)")
            let missing = try Self.request(page + "nothing-here", port: port)
            #expect(missing.status == 404, "\(missing.response)")
            events.append(DesktopWebServerHostTests.resultLine)  // the stream ends after it
            let stream = try Self.request(page + "events", port: port)
            #expect(stream.status == 200 && stream.response.contains("data: \(DesktopWebServerHostTests.qrLine)\n\n"), "\(stream.response)")
            #expect(events.streamsOpened == 1)
            #expect(refused.lines.withLock { $0 }.isEmpty, "\(refused.lines.withLock { $0 })")
        }
    }

    @Test("a token is 192 bits from the secure generator, 32 characters of unpadded base64url, fresh for each server, never in its description")
    func tokenShape() async throws {
        let tokens = (0..<64).map { _ in WebPageToken() }
        #expect(Set(tokens.map(\.text)).count == tokens.count)
        for token in tokens {
            #expect(token.text.count == 32 && WebPageToken.encodedLength == 32 && WebPageToken.size * 8 == 192)
            #expect(token.text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }, "\(token.text)")
            #expect(token.path == "/s/\(token.text)/")
            #expect(!"\(token)".contains(token.text) && !String(reflecting: token).contains(token.text))
        }
        let fixed = WebPageToken(random: RandomSource { Array(repeating: 0xFF, count: $0) })
        #expect(fixed.text == String(repeating: "_", count: 32))
        #expect(fixed.access("/s/\(fixed.text)/events") == .resource("/events"))
        #expect(fixed.access("/s/\(fixed.text)") == .resource(""))
        let first = try await DesktopWebServer.start(events: DesktopWebEvents(), port: 0)
        let second = try await DesktopWebServer.start(events: DesktopWebEvents(), port: 0)
        #expect(first.token.text != second.token.text)
        await first.stop()
        await second.stop()
    }
}
