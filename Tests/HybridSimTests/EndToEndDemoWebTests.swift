import Foundation
import HybridTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `hybrid-sim demo --web`: the whole demo on one page. The event stream carries the narration, the
/// QR code and the credentials and ends with the verdict; headless Chromium shows the story.
@Suite("End to end: demo --web", .serialized)
struct EndToEndDemoWebTests {
    @Test("the page tells the whole demo: three chapters, the QR code, the credentials, the verdict")
    func wholeStoryOnOnePage() async throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: EndToEndWebBrowserTests.chromium),
            "headless Chromium is missing: run Scripts/install-deps")
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        // The demo waits for the browser's page before it starts: a cold Chromium (CI's first launch)
        // took longer than the whole demo and its linger, so the page failed to load and dumped nothing.
        let demo = try lab.start(
            "demo", ["demo", "--web", "--web-port", "0", "--web-wait", "120", "--web-linger", "3", "--home", lab.file("demo")])
        let waiting = "web page: the demo starts when a page opens it (at most 120 s from now)"
        let lines = try await demo.waitForOutput("web page lines", in: \.standardError) { $0.contains(waiting) }
        let line = try #require(lines.first { $0.hasPrefix("web page: ") })
        let page = try #require(line.split(separator: " ").first { $0.hasPrefix("http://") }).description
        #expect(!lines.contains { $0.contains("demo │") }, "the demo waits for the page: \(lines)")
        let dom = try EndToEndWebBrowserTests.browser(lab, "demo-dom", page: page)
        _ = try await demo.waitForOutput("the page opened", timeout: .seconds(90), in: \.standardError) {
            $0.contains("web page: opened (1 so far)")
        }
        let events = try await EndToEndWebTests.get(page + "events")  // the second stream: a replay, then live
        #expect(try await dom.waitForExit(timeout: .seconds(90)) == 0, "\(dom.transcript)")
        #expect(try await demo.waitForExit(timeout: .seconds(90)) == 0, "\(demo.transcript)")
        // The capture the phone scanned holds the QR secret: owner only, like every QR output.
        let capture = lab.file("demo") + "/qr-mc.txt"
        #expect(try FileManager.default.attributesOfItem(atPath: capture)[.posixPermissions] as? Int == 0o600)

        let parsed = try EndToEndWebTests.events(events.body)
        let names = parsed.compactMap { $0["event"] as? String }
        #expect(names.filter { $0 == "qr" }.count == 1, "one QR ceremony, then two linked sign-ins: \(names)")
        #expect(names.last == "result")
        let said = parsed.compactMap { $0["line"] as? String }
        #expect(said.filter { $0.hasPrefix("── ") }.count == 3, "three chapters")
        #expect(said.contains { $0.contains("verified: alice signed in to example.com") })
        #expect(said.contains { $0.contains("\"type\" : \"public-key\"") } || said.contains { $0.contains("public-key") })

        let html = dom.standardOutput.text
        #expect(html.contains("data-state=\"result\""), "\(html)")
        #expect(html.contains("Done: registered by QR code and signed in twice through the link"), "\(html)")
        #expect(html.contains("class=\"chapter\""))
        #expect(html.contains("class=\"credential\""))
    }

    @Test("--web-wait with no page: the demo starts after the wait with a note, and runs to the end")
    func webWaitWithoutAPage() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let demo = try lab.start(
            "demo", ["demo", "--web", "--web-port", "0", "--web-wait", "1", "--web-linger", "0", "--home", lab.file("demo")])
        #expect(try await demo.waitForExit(timeout: .seconds(90)) == 0, "\(demo.transcript)")
        let lines = demo.standardError.lines
        let waiting = try #require(lines.firstIndex { $0 == "web page: the demo starts when a page opens it (at most 1 s from now)" })
        let note = try #require(lines.firstIndex { $0 == "web page: no page opened it within 1 s; the demo starts anyway" })
        let story = try #require(lines.firstIndex { $0.contains("│") })
        #expect(waiting < note && note < story, "\(lines)")
        #expect(!lines.contains { $0.hasPrefix("web page: opened") })
    }

    @Test("Ctrl-C while the page lingers after the demo ends it at once with the demo's status (0), not after the linger")
    func interruptDuringLinger() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let demo = try lab.start(
            "demo", ["demo", "--web", "--web-port", "0", "--web-linger", "120", "--home", lab.file("demo")])
        _ = try await demo.waitForOutput("the linger", timeout: .seconds(60), in: \.standardError) { lines in
            lines.contains { $0.hasPrefix("web page: still served for 120 s at ") && $0.hasSuffix("(Ctrl-C ends it)") }
        }
        demo.signal(SIGINT)
        #expect(try await demo.waitForExit(timeout: .seconds(10)) == 0, "\(demo.transcript)")
        #expect(demo.standardError.lines.last?.hasPrefix("web page: still served") == true, "nothing after the demo's own lines")
    }

    /// The port and path (`/s/TOKEN/`) of the page the demo printed (`web page: URL (the whole demo…)`).
    static func page(_ lines: [String]) throws -> (port: Int, path: String) {
        let line = try #require(lines.first { $0.hasPrefix("web page: http://") })
        return try EndToEndWebTests.pagePath(String(try #require(line.split(separator: " ").dropFirst(2).first)))
    }

    /// `demo --web --web-wait 120`, once it waits for a page; its stderr lines so far.
    static func startWaiting(_ lab: EndToEndLab) async throws -> (demo: ChildProcess, lines: [String]) {
        let demo = try lab.start(
            "demo", ["demo", "--web", "--web-port", "0", "--web-wait", "120", "--home", lab.file("demo")])
        let lines = try await demo.waitForOutput("the wait", timeout: .seconds(30), in: \.standardError) { lines in
            lines.contains { $0.hasPrefix("web page: the demo starts when a page opens it") }
        }
        return (demo, lines)
    }

    @Test("--web-wait: requests without the page's token, or with a wrong one, get 403 and do not start the demo; Ctrl-C while it waits: exit 130 with the demo's error line, not the whole demo later")
    func interruptDuringWebWait() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (demo, lines) = try await Self.startWaiting(lab)
        let (port, path) = try Self.page(lines)
        var wrong = Array(path)
        wrong[5] = wrong[5] == "A" ? "B" : "A"  // the token's third character
        for target in ["/events", "/", String(wrong) + "events"] {
            let exchange = try #require(
                LoopbackSocket.exchange(port: port, "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n", ioTimeout: 10))
            #expect(exchange.status == 403 && !exchange.response.contains("FIDO:/"), "\(target): \(exchange.response)")
        }
        _ = try await demo.waitForOutput("the refusals", timeout: .seconds(10), in: \.standardError) { lines in
            lines.filter { $0.hasPrefix("web page: refused GET ") && $0.contains(": 403 ") }.count == 3
        }
        try await Task.sleep(for: .seconds(1))  // a demo that started would have said so by now
        let said = demo.standardError.lines
        #expect(!said.contains { $0.hasPrefix("web page: opened") || $0.contains("│") }, "the demo started: \(said)")
        demo.signal(SIGINT)
        #expect(try await demo.waitForExit(timeout: .seconds(10)) == 130, "\(demo.transcript)")
        #expect(demo.standardError.lines.last == "error: demo interrupted by SIGINT", "\(demo.transcript)")
    }

    @Test("SIGTERM while the demo runs: an open page's stream ends with the interruption's line and an error event with its status (143), not in silence")
    func interruptTellsThePage() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (demo, lines) = try await Self.startWaiting(lab)
        let (port, path) = try Self.page(lines)
        // The stream, read on its own thread until the server closes it (it starts the demo).
        let stream = Task.detached {
            LoopbackSocket.exchange(port: port, "GET \(path)events HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n", ioTimeout: 20)
        }
        _ = try await demo.waitForOutput("the demo under way", timeout: .seconds(30), in: \.standardError) { lines in
            lines.contains { $0.hasPrefix("desktop │") }
        }
        demo.signal(SIGTERM)
        #expect(try await demo.waitForExit(timeout: .seconds(15)) == 143, "\(demo.transcript)")
        // The interruption's line is the terminal's last too: the demo's narration during the
        // page's settle is dropped.
        #expect(demo.standardError.lines.last?.hasPrefix("error: demo interrupted by SIGTERM") == true, "\(demo.transcript)")
        // The raw stream is chunked: its data lines, without the chunk sizes.
        let response = try #require(await stream.value).response.replacingOccurrences(of: "\r\n", with: "\n")
        let events = try EndToEndWebTests.events(response)
        let last = events.suffix(2).map { $0["event"] as? String }
        #expect(last == ["say", "error"], "\(response)")
        #expect((events.dropLast().last?["line"] as? String)?.hasPrefix("error: demo interrupted by SIGTERM") == true, "\(response)")
        #expect(events.last?["status"] as? Int == 143, "\(response)")
    }
}
