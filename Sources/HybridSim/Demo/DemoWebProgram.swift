import Foundation
import Synchronization

/// `hybrid-sim demo --web`: the whole demo (``DemoProgram``) told on one local page as well as in
/// the terminal. Every narration line, the QR code the phone scans, each credential JSON the desktop
/// prints and the final verdict are events on `events` (server-sent events, the same server as
/// `desktop --web`, below the same secret path `/s/TOKEN/`); the path itself is a page that shows
/// them as one story.
package enum DemoWebProgram {
    /// Serves the page on 127.0.0.1:`webPort` (0: a free port), prints
    /// `web page: http://127.0.0.1:PORT/s/TOKEN/` on stderr (the address with its secret,
    /// ``WebPageToken``; then calls `onServing` with it), waits up to `waitForPage` for a page to open
    /// the event stream (so it sees the demo live from the first line; a request without the token
    /// does not count), runs the demo, and keeps serving for `linger` after it ended so a page opened
    /// late still gets the whole story. Returns the demo's exit status (6: the port is taken).
    /// `events`: the page's stream; pass the one given to ``signalEnding(events:output:)`` so that
    /// an interruption's line reaches the page too.
    package static func main(
        _ configuration: DemoProgram.Configuration, webPort: Int, waitForPage: Duration = .zero,
        linger: Duration = .seconds(30), output: ProgramOutput = .standard, events: DesktopWebEvents? = nil,
        onServing: @Sendable (String) -> Void = { _ in }
    ) async -> Int32 {
        let events = events ?? DesktopWebProgram.announcingPages(output)
        let server: DesktopWebServer
        do {
            server = try await DesktopWebServer.start(
                events: events, port: webPort, page: DemoWebPage.html,
                maximumConnections: DescriptorLimit.webPageCap(DesktopWebServer.maximumConnections, under: DescriptorLimit.raiseToHard()),
                acceptLog: { output.standardError("web page: \($0)") })
        } catch {
            output.standardError("error: \(error.message)")
            return error.kind.exitCode
        }
        output.standardError("web page: \(server.url) (the whole demo as it happens)")
        onServing(server.url)
        if waitForPage > .zero {
            let seconds = waitForPage.components.seconds
            output.standardError("web page: the demo starts when a page opens it (at most \(seconds) s from now)")
            if await !events.waitForStream(timeout: waitForPage) {
                output.standardError("web page: no page opened it within \(seconds) s; the demo starts anyway")
            }
        }
        let tee = ProgramOutput(
            standardOutput: { line in
                if line.hasPrefix("FIDO:/") {
                    events.append(event("qr", ["url": line]))
                } else if !line.allSatisfy(\.isWhitespace),
                    !line.unicodeScalars.contains(where: { (0x2580...0x259F).contains($0.value) })
                {
                    events.append(event("output", ["line": line]))  // credential JSON; QR art is shown as an image
                }
                output.standardOutput(line)
            },
            standardError: { line in
                events.append(event("say", ["line": line]))
                output.standardError(line)
            })
        // Returns only when no signal's ending began (DemoProgram.main waits for one that did).
        let status = await DemoProgram.main(configuration, output: tee)
        events.append(status == 0 ? event("result", ["status": 0]) : event("error", ["status": Int(status)]))
        if linger > .zero {
            // The demo's lines are out: Ctrl-C now only cuts the linger short, with the demo's status.
            Interruption.exitOnSignals(status: status)
            output.standardError("web page: still served for \(linger.components.seconds) s at \(server.url) (Ctrl-C ends it)")
            try? await Task.sleep(for: linger)
        }
        await server.stop()
        return status
    }

    /// What SIGINT or SIGTERM ends `demo --web` with (install both with
    /// ``Interruption/endOnSignals(output:settle:_:)`` and a settle of a few tenths of a second):
    /// ``DemoProgram/signalEnding(json:)``'s line, which an open page also receives, as the story's
    /// last line and then the `error` event with the status, so that it says why the story stops
    /// instead of going quiet.
    package static func signalEnding(
        events: DesktopWebEvents, output: ProgramOutput = .standard
    ) -> (output: ProgramOutput, ending: @Sendable (String, Int32) -> Interruption.Ending) {
        let status = Mutex<Int32>(1)
        let ending = DemoProgram.signalEnding(json: false)
        let tee = ProgramOutput(
            standardOutput: output.standardOutput,
            standardError: { line in
                events.append(event("say", ["line": line]))
                events.append(event("error", ["status": Int(status.withLock { $0 })]))
                output.standardError(line)
            })
        return (tee, { signal, code in
            status.withLock { $0 = code }
            return ending(signal, code)
        })
    }

    /// One event line, `{"event": name, …}` with `event` first (the stream's end is found by prefix).
    static func event(_ name: String, _ fields: [String: Any]) -> String {
        let body = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])).map {
            String(decoding: $0, as: UTF8.self)
        } ?? "{}"
        let rest = body.dropFirst().dropLast()
        return "{\"event\":\"\(name)\"" + (rest.isEmpty ? "" : "," + rest) + "}"
    }
}

/// The page of `demo --web`: the story as it happens (narration lines by speaker), the QR code while
/// the phone has to scan it, each credential the desktop printed, and the verdict.
enum DemoWebPage {
    static let html = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <link rel="icon" href="data:,">
        <title>HybridSim demo: a passkey from your phone, by QR code and through the link</title>
        <style>
        body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 64rem; padding: 0 1rem; color: #222; }
        h1 { font-size: 1.4rem; }
        #qr img { width: 14rem; height: 14rem; max-width: 45%; image-rendering: pixelated; border: 1px solid #ddd; float: right; margin-left: 1rem; }
        #story { font-family: monospace; font-size: .75rem; white-space: pre-wrap; overflow-wrap: anywhere; }
        #story div { padding: .05rem .4rem; border-left: .3rem solid transparent; }
        #story .chapter { margin: .8rem 0 .2rem; font-weight: bold; font-family: system-ui, sans-serif; font-size: .95rem; border: none; }
        #story .relay { border-color: #7a4ea3; color: #5a2e83; }
        #story .desktop { border-color: #1f5fa8; }
        #story .phone { border-color: #1f7a3a; }
        #story .demo { color: #666; }
        pre.credential { background: #f5f5f5; padding: .5rem; font-size: .7rem; white-space: pre-wrap; overflow-wrap: anywhere; }
        #verdict { display: none; border: 2px solid #1f7a3a; padding: .75rem; margin-top: 1rem; }
        #verdict.failed { border-color: #b00020; color: #b00020; }
        </style>
        </head>
        <body>
        <h1>A passkey from your phone: registration by QR code, then two sign-ins through the link</h1>
        <div id="qr" hidden><img alt="the QR code the phone scans"></div>
        <noscript><p>This page tells the demo as it happens with JavaScript; without it, follow the demo in its terminal.</p></noscript>
        <div id="story" aria-live="polite"></div>
        <div id="verdict" role="status"></div>
        <script>
        const story = document.getElementById("story");
        let credential = null;
        function add(text, kind) {
          const line = document.createElement(kind === "chapter" ? "h2" : "div");
          line.textContent = text;
          if (kind) line.className = kind;
          story.appendChild(line);
        }
        // Relative to the page, so below its token path (/s/TOKEN/): the server answers nothing else.
        const source = new EventSource("events");
        source.onmessage = (message) => {
          const e = JSON.parse(message.data);
          if (e.event === "say") {
            if (e.line.startsWith("── ")) { add(e.line.replace(/[─ ]+$/, "").replace(/^── /, ""), "chapter"); credential = null; return; }
            credential = null;  // the next credential JSON starts a new block here
            const who = e.line.split("│")[0].trim();
            add(e.line, ["relay", "desktop", "phone", "demo"].includes(who) ? who : "");
            if (e.line.includes("signed in to") || e.line.includes("registered credential")) document.getElementById("qr").hidden = true;
          } else if (e.event === "qr") {
            const box = document.getElementById("qr");
            box.hidden = false;
            box.querySelector("img").src = "qr.svg";
          } else if (e.event === "output") {
            if (!credential) { credential = document.createElement("pre"); credential.className = "credential"; story.appendChild(credential); }
            credential.textContent += e.line + "\\n";
          } else if (e.event === "result" || e.event === "error") {
            const verdict = document.getElementById("verdict");
            verdict.style.display = "block";
            verdict.textContent = e.event === "result"
              ? "Done: registered by QR code and signed in twice through the link, every result verified."
              : "The demo failed (exit " + e.status + "): see the last lines above.";
            if (e.event === "error") { verdict.className = "failed"; document.getElementById("qr").hidden = true; }
            document.body.dataset.state = e.event;
            source.close();
          }
        };
        source.onerror = () => {
          if (!document.body.dataset.state) {
            const verdict = document.getElementById("verdict");
            verdict.style.display = "block";
            verdict.className = "failed";
            verdict.textContent = "Lost the connection to the demo before it ended: see its terminal.";
            document.getElementById("qr").hidden = true;
            document.body.dataset.state = "error";
          }
          source.close();
        };
        </script>
        </body>
        </html>
        """
}
