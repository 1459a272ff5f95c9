import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The demo's linked part: `hybrid-sim phone --listen` keeps its push channel open on the demo's
/// relay, and two `hybrid-sim desktop --linked any` runs sign in through the link, no QR code.
extension DemoProgram {
    static func linkedSignIns(
        configuration: Configuration, relayURL: String, home: String, output: ProgramOutput,
        say: @escaping @Sendable (String, String) -> Void, beforeEach: @Sendable () -> Void
    ) async -> Int32 {
        let environment = ["HYBRID_SIM_HOME": home]
        let seconds = String(Int(configuration.timeout.components.seconds))
        guard let port = freeUDPPort() else {
            output.standardError("error: no free UDP port for the desktop's proximity scanner")
            return 6
        }
        let listenArguments = [
            "phone", "--listen", "--relay", relayURL, "--proximity", "udp://127.0.0.1:\(port)", "--count", "2",
            "--timeout", seconds, "--listen-timeout", String(Int(configuration.timeout.components.seconds) * 3),
        ]
        output.standardError("")
        say("demo", "the phone now waits for linked desktops: starting hybrid-sim " + listenArguments.joined(separator: " "))
        let phone: ChildProcess
        do {
            phone = try ChildProcess(executable: configuration.executable, arguments: listenArguments, environment: environment)
        } catch {
            output.standardError("error: cannot start the listening phone: \(error)")
            return 1
        }
        let phoneLines = Task {
            for await line in phone.lines {
                switch line {
                case .standardOutput(let text): say("phone", text)
                case .standardError(let text): say("phone", LogTime.strip(text))  // the narration has no times
                }
            }
        }
        for round in 1...2 {
            let title = "\(round + 1)/3 sign-in through the link: no QR code; the relay wakes the phone over its push channel"
            output.standardError("")
            output.standardError("── \(title) " + String(repeating: "─", count: max(0, 78 - title.count)))
            beforeEach()
            let arguments = [
                "desktop", "--request", "ga", "--rp-id", configuration.rpID, "--linked", "any", "--relay", relayURL,
                "--proximity-port", String(port), "--timeout", seconds,
            ]
            say("demo", "starting: hybrid-sim " + arguments.joined(separator: " "))
            let desktop: ChildProcess
            do {
                desktop = try ChildProcess(executable: configuration.executable, arguments: arguments, environment: environment)
            } catch {
                phone.terminate()
                output.standardError("error: cannot start the desktop: \(error)")
                return 1
            }
            // The listening phone serves both sign-ins and exits 0 after sending the second
            // response (while that desktop may still verify it). If it fails, or ends before the
            // last sign-in, the desktop would wait for it until its timeout, so it is stopped too.
            let phoneWatch = phone.watch(stopping: desktop) { ending in !ending.isSuccess || round < 2 }
            var result: [String] = []
            // As in the QR ceremonies: a desktop that outlives all its own waits is stopped.
            let limit = configuration.timeout * 3 + configuration.hangGrace
            let hung = desktop.stop(at: .now + limit)
            for await line in desktop.lines {
                switch line {
                case .standardOutput(let text): result.append(text)
                case .standardError(let text): say("desktop", text)
                }
            }
            hung.cancel()
            if await hung.value {
                phoneWatch.cancel()
                await phone.end()
                output.standardError("error: linked sign-in \(round) failed: the desktop did not finish within \(limit.seconds); the demo stopped it")
                return 3
            }
            let status = await desktop.waitForExit(timeout: configuration.timeout)
            phoneWatch.cancel()
            if let phoneEnded = await phoneWatch.value, phoneEnded.stoppedOther {
                await phoneLines.value
                let why = phoneEnded.status.isSuccess
                    ? "the listening phone ended (exit 0) before the last sign-in"
                    : "the listening phone \(DemoProgram.explained(phoneEnded.status))"
                output.standardError("error: linked sign-in \(round) failed: \(why), so the demo stopped the desktop")
                return phoneEnded.status.isSuccess ? 3 : phoneEnded.status.demoStatus
            }
            guard let status, status.isSuccess else {
                phone.terminate()
                output.standardError("error: linked sign-in \(round) failed (desktop \(status.map { "\($0)" } ?? "timed out"))")
                return status?.demoStatus ?? 3
            }
            say("demo", "the desktop printed the WebAuthn PublicKeyCredential JSON (\(result.joined(separator: "\n").utf8.count) bytes)\(configuration.json ? "" : ":")")
            printCredential(result, step: "linked sign-in \(round)", json: configuration.json, output: output)
        }
        let phoneStatus = await phone.waitForExit(timeout: .seconds(10))
        await phoneLines.value
        guard let phoneStatus, phoneStatus.isSuccess else {
            output.standardError("error: the listening phone \(phoneStatus.map { "\($0)" } ?? "did not exit in time")")
            return phoneStatus?.demoStatus ?? 3
        }
        return 0
    }

    /// A failed child's ending for an error line: "exited 2 (its error is above)", or "was killed by
    /// signal 9 (SIGKILL)" (a killed child printed no error of its own).
    static func explained(_ ending: ChildProcess.Ending) -> String {
        if case .exited = ending { return "\(ending) (its error is above)" }
        return "\(ending)"
    }

    /// A loopback UDP port that was free a moment ago.
    private static func freeUDPPort() -> Int? {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        return bound ? Int(UInt16(bigEndian: address.sin_port)) : nil
    }
}
