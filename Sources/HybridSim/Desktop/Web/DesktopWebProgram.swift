import HybridRuntime

/// `hybrid-sim desktop --web`: the same ceremony as ``DesktopProgram`` (its `--json` events), with a
/// local page that plays the website (``DesktopWebServer``). The events still go to `output`.
package enum DesktopWebProgram {
    /// The default `--web-port`.
    package static let defaultPort = 47003

    /// Serves the page on 127.0.0.1:`webPort` (0: a free port; `nil`: ``defaultPort``, or a free
    /// port with a `note:` when that is taken, as the desktop's other default ports do), prints
    /// `web page: http://127.0.0.1:PORT/s/TOKEN/` on stderr (the address with its secret,
    /// ``WebPageToken``; then calls `onServing` with it), runs the desktop, then keeps serving for
    /// `linger` so an open page receives the last event. Returns the desktop's exit status (6 when
    /// a given port is taken). `events`: the page's stream; a caller passes its own to add a line
    /// the program does not write (the interruption's `error` event, ``interruptionOutput(_:output:)``);
    /// by default, one that says on stderr when a page opens it (``announcingPages(_:)``).
    package static func main(
        _ configuration: DesktopConfiguration, webPort: Int?, output: ProgramOutput = .standard,
        events: DesktopWebEvents? = nil,
        linger: Duration = .seconds(2), onServing: @Sendable (String) -> Void = { _ in }
    ) async -> Int32 {
        let events = events ?? announcingPages(output)
        let server: DesktopWebServer
        let cap = DescriptorLimit.webPageCap(DesktopWebServer.maximumConnections, under: DescriptorLimit.raiseToHard())
        let acceptLog: @Sendable (String) -> Void = { output.standardError("web page: \($0)") }
        do {
            do {
                server = try await DesktopWebServer.start(
                    events: events, port: webPort ?? defaultPort, maximumConnections: cap, acceptLog: acceptLog)
            } catch where webPort == nil {
                // `rp`'s default port is the same: a relying party serving there is the usual case.
                server = try await DesktopWebServer.start(events: events, port: 0, maximumConnections: cap, acceptLog: acceptLog)
                output.standardError("note: port \(defaultPort) is in use; serving the web page on a free port instead")
            }
        } catch {
            output.standardError("error: \(error.message)")
            // The page's events go to stdout whatever --json says: a script reading them gets the
            // error as its last line, as every other failure gives it.
            var narrator = DesktopNarrator(output: output, json: true)
            narrator.flow = configuration.eventFlow
            narrator.event("error", JSONLine.errorMembers(error))
            return error.kind.exitCode
        }
        output.standardError("web page: \(server.url)")
        onServing(server.url)
        var json = configuration
        json.json = true
        let tee = tee(output, to: events)
        let status = await DesktopProgram.main(json, output: tee)
        events.finish()
        try? await Task.sleep(for: linger)
        await server.stop()
        return status
    }

    /// Where Ctrl-C's final lines go under `--web`: to `output` and, so that an open page learns
    /// why its stream ends, to the page's `events` (``Interruption/endOnSignals(output:settle:_:)``
    /// gives the page a moment to receive it before the process exits).
    package static func interruptionOutput(_ events: DesktopWebEvents, output: ProgramOutput = .standard) -> ProgramOutput {
        tee(output, to: events)
    }

    /// A page's event stream that says on `output`'s stderr each time a page opens it
    /// (`web page: opened (1 so far)`), so whoever started the program knows the page is following.
    package static func announcingPages(_ output: ProgramOutput = .standard) -> DesktopWebEvents {
        let refusals = RefusalLog { line in output.standardError("web page: refused \(PeerText.printable(line, limit: PeerText.lineLimit))") }
        return DesktopWebEvents(
            onStreamOpened: { count in output.standardError("web page: opened (\(count) so far)") },
            onRefused: { line in refusals.note(line) })
    }

    /// `output`, with every stdout line also appended to `events`.
    private static func tee(_ output: ProgramOutput, to events: DesktopWebEvents) -> ProgramOutput {
        ProgramOutput(
            standardOutput: { line in
                events.append(line)
                output.standardOutput(line)
            },
            standardError: output.standardError)
    }
}
