import Foundation
import Testing

/// `desktop --web` in a real browser: Debian's headless Chromium (installed by Scripts/install-deps)
/// opens the page before the phone scans, the page follows the ceremony live, and the DOM it ends with
/// is checked, for a registration and a sign-in. The sign-in's screenshot is saved (set
/// `HYBRID_SIM_SCREENSHOT_DIR` to keep it; Docs/web-sign-in.png is one).
@Suite("End to end: desktop --web in headless Chromium", .serialized, .timeLimit(.minutes(5)))
struct EndToEndWebBrowserTests {
    static let chromium = "/usr/bin/chromium"

    /// Starts headless Chromium on `page`: it dumps the DOM (or takes a screenshot) once the page
    /// has settled, which is after the event stream ended.
    static func browser(_ lab: EndToEndLab, _ name: String, page: String, screenshot: String? = nil) throws -> ChildProcess {
        var arguments = [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
            "--user-data-dir=\(lab.file("chromium-\(name)"))", "--virtual-time-budget=20000",
        ]
        if let screenshot {
            arguments += ["--window-size=900,1250", "--screenshot=\(screenshot)"]
        } else {
            arguments.append("--dump-dom")
        }
        return try lab.startOther(name, arguments + [page])
    }

    @Test func registrationAndSignInInTheBrowser() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.chromium), "headless Chromium is missing: run Scripts/install-deps")
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        for request in ["mc", "ga"] {
            let desktop = try await lab.startDesktop(["--request", request, "--web", "--web-port", "0"], json: true)
            let lines = try await desktop.process.waitForOutput("web page line", in: \.standardError) { $0.contains { $0.hasPrefix("web page: ") } }
            let page = String(try #require(lines.first { $0.hasPrefix("web page: ") }).dropFirst("web page: ".count))
            let shot = lab.file("web-\(request).png")
            let dom = try Self.browser(lab, "dom-\(request)", page: page)
            let camera = try Self.browser(lab, "shot-\(request)", page: page, screenshot: shot)
            // Both pages follow the events before the phone scans (a cold Chromium can take seconds to
            // load them; one that came after the linger would dump nothing).
            _ = try await desktop.process.waitForOutput("both pages opened", timeout: .seconds(90), in: \.standardError) {
                $0.contains("web page: opened (2 so far)")
            }
            let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url])
            #expect(try await dom.waitForExit(timeout: .seconds(60)) == 0, "\(dom.transcript)")
            #expect(try await camera.waitForExit(timeout: .seconds(60)) == 0, "\(camera.transcript)")
            #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)\n\(phone.transcript)")
            #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")

            let html = dom.standardOutput.text
            #expect(html.contains("data-state=\"result\""), "\(html)")
            for step in ["qr", "advert", "connected", "handshake", "request", "response", "result"] {
                #expect(html.contains("<li data-step=\"\(step)\" class=\"done\">"), "step \(step) not done in \(html)")
            }
            let verdict = (request == "mc" ? "Passkey registered" : "Signed in") + " on example.com (checked by the built-in relying party)"
            #expect(html.contains("<p id=\"verdict\">\(verdict)</p>"), "\(html)")
            // The heading follows the request (it said "Sign in" for a registration too).
            let title = request == "mc" ? "Create a passkey with your phone" : "Sign in with a passkey from your phone"
            #expect(html.contains("<h1 id=\"title\">\(title)</h1>"), "\(html)")
            #expect(html.contains("&quot;type&quot;: &quot;public-key&quot;") || html.contains("\"type\": \"public-key\""), "\(html)")
            #expect(html.contains("id=\"error\" style=\"display: none") || !html.contains("data-state=\"error\""))

            let png = try Data(contentsOf: URL(fileURLWithPath: shot))
            #expect(png.prefix(8) == Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]))
            if let keep = ProcessInfo.processInfo.environment["HYBRID_SIM_SCREENSHOT_DIR"], request == "ga" {
                try? FileManager.default.removeItem(atPath: keep + "/web-sign-in.png")
                try FileManager.default.copyItem(atPath: shot, toPath: keep + "/web-sign-in.png")
            }
        }
    }
}
