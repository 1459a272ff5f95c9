import CTAP2
import Foundation
import HybridCore
import HybridFiles
import HybridRuntime
import Logging
import Synchronization

/// `hybrid-sim demo`: the whole story in one terminal. An embedded relay runs in this process; the
/// desktop and the phone run as two child processes of the same `hybrid-sim` binary; the phone
/// scans the QR code the desktop printed (its terminal art, saved as a text capture). First a
/// registration by QR code with linking, then two sign-ins through the link (no QR code: the
/// listening phone is woken through the relay's push channel), every step narrated: who sends
/// what, how big, what was verified.
public enum DemoProgram {
    /// What to run.
    public struct Configuration: Sendable {
        /// The `hybrid-sim` binary to start the desktop and the phone from.
        public var executable: String
        /// Relying party ID (and `https://` origin).
        public var rpID = "example.com"
        /// The account to register.
        public var user = "alice"
        /// Limit for each step (each child process).
        public var timeout: Duration = .seconds(60)
        /// Beyond three times ``timeout``, how long a desktop that printed its QR code may run
        /// before the demo stops it as hung (its own waits end well before; tests shorten it).
        package var hangGrace: Duration = .seconds(60)
        /// Where the stores go; a fresh temporary directory when `nil`.
        public var home: String?
        /// Standard output carries one JSON event per line (`qr`, `credential`, then `result` or
        /// `error`) instead of the QR art, the `FIDO:/` URL and the credentials as the desktop
        /// printed them; the narration stays on standard error (`hybrid-sim demo --json`).
        public var json = false

        /// A configuration for `executable`.
        public init(executable: String) { self.executable = executable }
    }

    /// The temporary directory of the demo that runs (`nil` with `--home`, or when none runs).
    private static let temporaryHome = Mutex<String?>(nil)

    /// What SIGINT or SIGTERM ends `hybrid-sim demo` with (``Interruption/endOnSignals(output:settle:_:)``):
    /// the desktop and phone it started are stopped (they would otherwise outlive it by up to a
    /// step's timeout), its temporary directory, which holds private keys, is removed, and one
    /// `error: demo interrupted by SIGNAL` line ends it, exit 130 or 143.
    package static func signalEnding(json: Bool) -> @Sendable (String, Int32) -> Interruption.Ending {
        { signal, status in
            let stopped = RunningChildren.stopAll(within: .seconds(3)).count
            if let home = temporaryHome.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: home) }
            let children = stopped == 0 ? "" : "; stopped the \(stopped == 1 ? "program" : "\(stopped) programs") it had started"
            return Interruption.ending("demo interrupted by \(signal)\(children)", status: status, json: json)
        }
    }

    /// Runs the demo; returns the process exit code (0 when both ceremonies verified).
    public static func main(_ configuration: Configuration, output given: ProgramOutput = .standard) async -> Int32 {
        // The demo's own final `error:` line claims the ending first (``Interruption/beginEnding()``):
        // a signal's ending stops the children, which the demo would otherwise report as a
        // second failure line after the signal's.
        // The demo's own last error line, and the first error line a child printed (the failure's
        // cause; a child the demo then stopped prints its own "interrupted by SIGTERM" after it),
        // for the `error` event of --json.
        let lastError = Mutex<(demo: String?, child: String?)>((nil, nil))
        // Once a signal's ending began, its line is the last: what the demo still says while the
        // process settles (`demo --web` gives an open page 0.3 s) is dropped.
        let output = ProgramOutput(
            standardOutput: { line in
                if !Interruption.isSignalEnding { given.standardOutput(line) }
            },
            standardError: { line in
                guard !Interruption.isSignalEnding else { return }
                if line.hasPrefix("error: ") {
                    Interruption.beginEnding()
                    lastError.withLock { $0.demo = String(line.dropFirst("error: ".count)) }
                }
                given.standardError(line)
            })
        let status = await run(configuration, output: output) { error in
            lastError.withLock { $0.child = $0.child ?? error }
        }
        // A signal's ending that began meanwhile (it stopped the children, so `run` came back with
        // their status) writes the last line and exits: wait for it, rather than exit first with
        // the children's status and no line (its line was lost 1 run in 4).
        Interruption.beginEnding()
        if configuration.json {
            // The ending as an event too, as `desktop --json` and `phone --json` end, with the
            // failing child's own error when it printed one (the message says "its error is above").
            let errors = lastError.withLock { $0 }
            var members = JSONLine.errorMembers(
                kind: Self.kind(ofStatus: status), exitCode: status, message: errors.demo ?? "the demo failed")
            if let child = errors.child { members.append(("childError", .string(child))) }
            given.standardOutput((status == 0 ? JSONLine(event: "result", [("ceremonies", .int(3))]) : JSONLine(event: "error", members)).text)
        }
        return status
    }

    /// The `kind` of the demo's `error` event for exit `status` (the failing child's): the kind of
    /// that status in the exit-code table, `interrupted` for a child ended by a signal's status
    /// (128 + N), `failed` for any other.
    static func kind(ofStatus status: Int32) -> String {
        if let kind = ProgramFailure.Kind.allCases.first(where: { $0.exitCode == status }) { return kind.rawValue }
        return status > 128 && status < 160 ? "interrupted" : ProgramFailure.Kind.failed.rawValue
    }

    /// What the demo's standard output gets for the credential the desktop printed (`lines`, its
    /// pretty-printed JSON): the lines, or with ``Configuration/json`` one `credential` event
    /// holding the same JSON on one line (a JSON string has no line break, so the lines joined
    /// without their indentation are the same document).
    static func printCredential(_ lines: [String], step: String, json: Bool, output: ProgramOutput) {
        guard json else {
            for line in lines { output.standardOutput(line) }
            return
        }
        let compact = lines.map { $0.trimmingCharacters(in: .whitespaces) }.joined()
        // Only a JSON object goes in as it is; anything else the desktop printed is a string, so the
        // line stays JSON.
        let isObject = (try? JSONSerialization.jsonObject(with: Data(compact.utf8))) is [String: Any]
        let credential: JSONLine.Value = isObject ? .raw(compact) : .string(lines.joined(separator: "\n"))
        output.standardOutput(JSONLine(event: "credential", [("step", .string(step)), ("credential", credential)]).text)
    }

    /// The demo itself; `childError` hears each error line a child printed (`error: …`).
    private static func run(
        _ configuration: Configuration, output: ProgramOutput, childError: @escaping @Sendable (String) -> Void
    ) async -> Int32 {
        let say: @Sendable (String, String) -> Void = { who, line in
            if who != "demo", line.hasPrefix("error: ") { childError(String(line.dropFirst("error: ".count))) }
            output.standardError(who.padding(toLength: 8, withPad: " ", startingAt: 0) + "│ " + line)
        }
        let home: String
        if let configured = configuration.home {
            home = configured
        } else {
            home = FileManager.default.temporaryDirectory.appendingPathComponent("hybrid-sim-demo-\(UUID().uuidString.prefix(8))").path
        }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: home, isDirectory: &isDirectory), !isDirectory.boolValue {
            output.standardError("error: cannot use the demo directory \(home): it is a file, not a directory")
            return 2
        }
        if configuration.home == nil {
            // The temporary directory must exist: a mistyped TMPDIR is said, not made (as root
            // `createDirectory`'s parents would be), with the system's reason.
            guard mkdir(home, 0o700) == 0 else {
                let reason = String(cString: strerror(errno)).lowercased()
                output.standardError("error: cannot create the demo directory \(home): \(reason)\(Self.temporaryHint())")
                return 1
            }
        } else {
            do {
                try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                output.standardError("error: cannot create the demo directory \(home): \(error.localizedDescription)")
                return 1
            }
        }
        // The temporary stores hold private keys: they go when the demo ends (`--home` keeps them),
        // by a signal too (``signalEnding(json:)``).
        if configuration.home == nil { temporaryHome.withLock { $0 = home } }
        defer {
            if configuration.home == nil {
                temporaryHome.withLock { $0 = nil }
                try? FileManager.default.removeItem(atPath: home)
            }
        }
        output.standardError(
            "HybridSim demo: register a passkey on a phone by QR code and link the phone, then sign in twice through the link.")
        let observer = WireObserver(say: say)
        var relayConfiguration = RelayConfiguration()
        relayConfiguration.messageObserver = { direction, message in observer.saw(direction, message) }
        // The desktop's embedded relay's fit: a fast 503 past it, not an accept that fails.
        relayConfiguration.maxConnections = DescriptorLimit.embeddedRelayCap(
            relayConfiguration.maxConnections, under: DescriptorLimit.raiseToHard())
        var logger = Logger(label: "hybrid-sim.demo")
        logger.logLevel = .warning
        let relay = TunnelRelay(configuration: relayConfiguration, logger: logger)
        let endpoint: RelayEndpoint
        do {
            endpoint = try await relay.start()
        } catch {
            output.standardError("error: cannot start the embedded relay: \(error)")
            return 6
        }
        say("demo", "tunnel service (relay) running in this process at \(endpoint.url)")
        say("demo", "fresh passkey and relying-party stores in \(home)\(configuration.home == nil ? " (removed at the end; --home DIR keeps them)" : "")")
        defer { Task { await relay.shutdown() } }

        let title = "1/3 registration by QR code with --link: a passkey for \(configuration.user) @ \(configuration.rpID), and the phone is linked"
        output.standardError("")
        output.standardError("── \(title) " + String(repeating: "─", count: max(0, 78 - title.count)))
        observer.reset(linked: false)
        let code = await ceremony(
            request: "mc", configuration: configuration, relayURL: endpoint.url, home: home, output: output, say: say)
        guard code == 0 else { return code }
        let linkedCode = await linkedSignIns(
            configuration: configuration, relayURL: endpoint.url, home: home, output: output, say: say,
            beforeEach: { observer.reset(linked: true) })
        guard linkedCode == 0 else { return linkedCode }
        Interruption.beginEnding()
        output.standardError("")
        say("demo", "done: a passkey was registered by QR code and used twice through the link; every result was verified by the desktop's relying party.")
        say("demo", "try it in two terminals next: see \"Two terminals\" in README.md")
        return 0
    }

    private static func ceremony(
        request: String, configuration: Configuration, relayURL: String, home: String, output: ProgramOutput,
        say: @escaping @Sendable (String, String) -> Void
    ) async -> Int32 {
        let environment = ["HYBRID_SIM_HOME": home]
        var desktopArguments = [
            "desktop", "--request", request, "--rp-id", configuration.rpID, "--relay", relayURL, "--proximity-port", "0",
            "--timeout", String(Int(configuration.timeout.components.seconds)),
        ]
        if request == "mc" { desktopArguments += ["--user", configuration.user, "--link"] }
        say("demo", "starting: hybrid-sim " + desktopArguments.joined(separator: " "))
        let desktop: ChildProcess
        do {
            desktop = try ChildProcess(executable: configuration.executable, arguments: desktopArguments, environment: environment)
        } catch {
            output.standardError("error: cannot start the desktop (\(configuration.executable)): \(error)")
            return 1
        }
        // Read the desktop until it has printed the QR code and its proximity port.
        var art: [String] = []
        var url: String? = nil
        var proximity: String? = nil
        var resultLines: [String] = []
        var iterator = desktop.lines.makeAsyncIterator()
        let deadline = ContinuousClock.now + configuration.timeout
        // A desktop that says nothing and does not end is stopped at the step's limit.
        let overdue = desktop.stop(at: deadline)
        while url == nil || proximity == nil, let line = await iterator.next() {
            switch line {
            case .standardOutput(let text):
                // The terminal art as it comes and then the URL; with --json one `qr` event.
                if text.hasPrefix("FIDO:/") {
                    url = text
                    output.standardOutput(
                        configuration.json ? JSONLine(event: "qr", [("step", .string("registration")), ("url", .string(text))]).text : text)
                } else if url == nil {
                    art.append(text)
                    if !configuration.json { output.standardOutput(text) }
                }
            case .standardError(let text):
                say("desktop", text)
                if let range = text.range(of: "proximity scanner listening on ") {
                    proximity = text[range.upperBound...].split(separator: " ").first.map(String.init)
                }
            }
        }
        overdue.cancel()
        let stoppedLate = await overdue.value
        guard let url, let proximity, !stoppedLate else {
            let notPrinted = "error: the desktop did not print its QR code and proximity port within \(configuration.timeout.seconds)"
            if stoppedLate {
                output.standardError(notPrinted)
                return 3
            }
            // The desktop ended (a damaged store, a port in use) before printing both: its own
            // status and error, not a guess.
            let ended = if let status = desktop.status { status } else { await desktop.waitForExit(timeout: .seconds(5)) }
            if let ended, !ended.isSuccess {
                output.standardError("error: \(request == "mc" ? "registration" : "sign-in") failed: the desktop \(DemoProgram.explained(ended)) before it printed its QR code")
                return ended.demoStatus
            }
            desktop.terminate()
            output.standardError(notPrinted)
            return ended == nil ? 3 : 1
        }
        let capture = URL(fileURLWithPath: home).appendingPathComponent("qr-\(request).txt")
        do {
            // The capture holds the QR secret: owner only, as every QR output is written.
            try FileWriter.replacePrivately(capture.path, with: Array((art.joined(separator: "\n") + "\n").utf8))
        } catch {
            desktop.terminate()
            output.standardError("error: cannot save the QR capture: \(error)")
            return 1
        }
        say("demo", "the phone scans the QR code the desktop printed: \(art.count) lines of terminal art saved as \(capture.lastPathComponent) (\(url.count - 6) digits after FIDO:/)")
        let phoneArguments = ["phone", "--scan", capture.path, "--relay", relayURL, "--proximity", proximity,
                              "--timeout", String(Int(configuration.timeout.components.seconds))]
        say("demo", "starting: hybrid-sim " + phoneArguments.joined(separator: " "))
        let phone: ChildProcess
        do {
            phone = try ChildProcess(executable: configuration.executable, arguments: phoneArguments, environment: environment)
        } catch {
            desktop.terminate()
            output.standardError("error: cannot start the phone: \(error)")
            return 1
        }
        let phoneLines = Task {
            for await line in phone.lines {
                switch line {
                case .standardOutput(let text), .standardError(let text): say("phone", text)
                }
            }
        }
        // A phone that fails (no relay, a refused QR code) ends the ceremony: the desktop would
        // otherwise wait for it until its timeout.
        let phoneWatch = phone.watch(stopping: desktop) { !$0.isSuccess }
        // The desktop bounds its own waits (the phone's advert, then its answer, each within the
        // timeout; its connections and messages within 10 s each): one that outlives them all,
        // with a margin, is stopped.
        let limit = configuration.timeout * 3 + configuration.hangGrace
        let hung = desktop.stop(at: .now + limit)
        while let line = await iterator.next() {
            switch line {
            case .standardOutput(let text): resultLines.append(text)
            case .standardError(let text): say("desktop", text)
            }
        }
        hung.cancel()
        let ceremony = request == "mc" ? "registration" : "sign-in"
        if await hung.value {
            phoneWatch.cancel()
            await phone.end()
            await phoneLines.value
            output.standardError("error: \(ceremony) failed: the desktop did not finish within \(limit.seconds); the demo stopped it")
            return 3
        }
        let desktopStatus = await desktop.waitForExit(timeout: configuration.timeout)
        phoneWatch.cancel()
        let phoneStatus = await phone.waitForExit(timeout: .seconds(10))
        await phoneLines.value
        if let phoneEnded = await phoneWatch.value, phoneEnded.stoppedOther {
            output.standardError(
                "error: \(ceremony) failed: the phone \(DemoProgram.explained(phoneEnded.status)), so the demo stopped the desktop")
            return phoneEnded.status.demoStatus
        }
        guard let desktopStatus, desktopStatus.isSuccess, let phoneStatus, phoneStatus.isSuccess else {
            output.standardError(
                "error: \(ceremony) failed (desktop \(desktopStatus.map { "\($0)" } ?? "timed out"), phone \(phoneStatus.map { "\($0)" } ?? "timed out"))")
            // The desktop's status when it failed, else the phone's (an error line, never exit 0).
            if let desktopStatus, desktopStatus.isSuccess { return phoneStatus?.demoStatus ?? 3 }
            return desktopStatus?.demoStatus ?? 3
        }
        let json = resultLines.joined(separator: "\n")
        say("demo", "the desktop printed the WebAuthn PublicKeyCredential JSON (\(json.utf8.count) bytes)\(configuration.json ? "" : ":")")
        printCredential(resultLines, step: "registration", json: configuration.json, output: output)
        return 0
    }
}

/// Narrates what the relay carries, labelling each message by its place in a QR transaction.
private final class WireObserver: Sendable {
    private let counts = Mutex<(toDesktop: Int, toPhone: Int, linked: Bool)>((0, 0, false))
    private let say: @Sendable (String, String) -> Void

    init(say: @escaping @Sendable (String, String) -> Void) { self.say = say }

    /// A new transaction; in a linked one the desktop opened the tunnel (`/cable/contact`), so the
    /// relay's creator is the desktop.
    func reset(linked: Bool) { counts.withLock { $0 = (0, 0, linked) } }

    func saw(_ direction: RelayDirection, _ message: [UInt8]) {
        let linked = counts.withLock { $0.linked }
        if linked {
            sawLinked(phoneToDesktop: direction == .joinerToCreator, message)
            return
        }
        switch direction {
        case .creatorToJoiner:
            let n = counts.withLock { c -> Int in c.toDesktop += 1; return c.toDesktop }
            let what = ["Noise handshake message 2 (phone's ephemeral key ‖ tag)", "post-handshake message (encrypted getInfo)",
                        "update message (encrypted, padded to 512)", "CTAP2 response (encrypted)"]
            say("relay", "phone → desktop \(message.count) bytes: \(n <= what.count ? what[n - 1] : "message \(n)")")
        case .joinerToCreator:
            let n = counts.withLock { c -> Int in c.toPhone += 1; return c.toPhone }
            let what = ["Noise KNpsk0 handshake message 1 (desktop's ephemeral key ‖ tag)", "CTAP2 request (encrypted)",
                        "shutdown (encrypted)"]
            say("relay", "desktop → phone \(message.count) bytes: \(n <= what.count ? what[n - 1] : "message \(n)")")
        }
    }

    private func sawLinked(phoneToDesktop: Bool, _ message: [UInt8]) {
        if phoneToDesktop {
            let n = counts.withLock { c -> Int in c.toDesktop += 1; return c.toDesktop }
            let what = ["Noise NKpsk0 handshake message 2 (phone's ephemeral key ‖ tag)", "post-handshake message (encrypted getInfo; no update message when linked)",
                        "CTAP2 response (encrypted)"]
            say("relay", "phone → desktop \(message.count) bytes: \(n <= what.count ? what[n - 1] : "message \(n)")")
        } else {
            let n = counts.withLock { c -> Int in c.toPhone += 1; return c.toPhone }
            let what = ["Noise NKpsk0 handshake message 1 (desktop's ephemeral key ‖ tag, against the phone's identity key)",
                        "CTAP2 request (encrypted)", "shutdown (encrypted)"]
            say("relay", "desktop → phone \(message.count) bytes: \(n <= what.count ? what[n - 1] : "message \(n)")")
        }
    }
}

extension DemoProgram {
    /// Where a demo directory without `--home` goes, and what to change: the temporary directory
    /// comes from `TMPDIR` when it is set.
    static func temporaryHint() -> String {
        let parent = FileManager.default.temporaryDirectory.path
        let source = ProcessInfo.processInfo.environment["TMPDIR"].map { _ in ", from TMPDIR" } ?? ""
        return " (in the temporary directory \(parent)\(source); set TMPDIR to a directory you can write, or give --home DIR)"
    }
}
