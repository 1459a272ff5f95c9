import Foundation
import HybridSim
import Testing

/// Standard output that cannot be written: a reader that leaves early, a closed descriptor, a
/// full disk. The desktop's sign-in must not be lost to it (it was: Foundation's `FileHandle.write`
/// trapped, exit 132, after the relying party had verified and stored the registration), and a
/// command whose output is its result fails saying so instead of exiting 0.
@Suite("End to end: standard output that cannot be written")
struct EndToEndOutputTests {
    /// Runs `hybrid-sim desktop ARGUMENTS` through `bash -c` with `redirect` after it (`| head -n
    /// 1`, `>&-`), then a phone for it, and returns the desktop side's status and process.
    private func registerThrough(_ redirect: String, _ lab: EndToEndLab) async throws -> (Int32, ChildProcess) {
        let binary = try HybridSimBinary.url().path
        let png = lab.file("qr.png")
        let desktop = try lab.startOther(
            "desktop \(redirect)",
            ["bash", "-c",
             "set -o pipefail; '\(binary)' desktop --request mc --json --relay-port 0 --proximity-port 0 --qr-png '\(png)' --timeout 30 \(redirect)"])
        let errors = try await desktop.waitForOutput("phone command line", in: \.standardError) { lines in
            lines.contains { $0.hasPrefix("phone command:") }
        }
        let command = try #require(errors.first { $0.hasPrefix("phone command:") })
        let relay = try #require(EndToEndLab.word(after: "--relay ", in: command))
        let proximity = try #require(EndToEndLab.word(after: "--proximity ", in: command))
        let phone = try lab.start("phone", ["phone", "--scan", png, "--relay", relay, "--proximity", proximity])
        #expect(try await phone.waitForExit(timeout: .seconds(40)) == 0, "\(phone.transcript)\n\(desktop.transcript)")
        return (try await desktop.waitForExit(timeout: .seconds(40)), desktop)
    }

    @Test("desktop --json | head -n 1: the reader leaves after the QR event, the registration still completes (exit 0) with one note")
    func readerLeavesEarly() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (status, desktop) = try await registerThrough("| head -n 1", lab)
        #expect(status == 0, "\(desktop.transcript)")
        #expect(desktop.standardOutput.lines.count == 1 && desktop.standardOutput.text.hasPrefix("{\"event\":\"qr\""), "\(desktop.transcript)")
        #expect(
            desktop.standardError.lines.contains(
                "note: cannot write standard output (broken pipe); its remaining lines are dropped, the run goes on"),
            "\(desktop.transcript)")
        #expect(desktop.standardError.text.contains("verified: registered credential"), "\(desktop.transcript)")
        #expect(try RelyingPartyStore.load(path: lab.relyingPartyStore).credentials.count == 1)
    }

    @Test("desktop started with stdout closed (>&-): its lines go nowhere (not into a socket that took descriptor 1), exit 0, one note")
    func closedStandardOutput() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (status, desktop) = try await registerThrough(">&-", lab)
        #expect(status == 0, "\(desktop.transcript)")
        #expect(
            desktop.standardError.lines.contains(
                "note: cannot write standard output (bad file descriptor); its remaining lines are dropped, the run goes on"),
            "\(desktop.transcript)")
        #expect(try RelyingPartyStore.load(path: lab.relyingPartyStore).credentials.count == 1)
    }

    @Test("desktop --json started with stderr closed (2>&-): the registration completes, exit 0, the result event on stdout")
    func closedStandardError() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let binary = try HybridSimBinary.url().path
        let desktop = try lab.startOther(
            "desktop 2>&-",
            ["bash", "-c", "'\(binary)' desktop --request mc --json --relay-port 0 --proximity-port 0 --timeout 30 2>&-"])
        let events = try await desktop.waitForOutput("the qr event") { $0.contains { $0.hasPrefix("{\"event\":\"qr\"") } }
        let qr = try #require(
            try events.first { $0.hasPrefix("{\"event\":\"qr\"") }.flatMap {
                try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            })
        let (url, relay, proximity) = (qr["url"] as? String, qr["relay"] as? String, qr["proximity"] as? String)
        let phone = try lab.start("phone", ["phone", "--qr", try #require(url), "--relay", try #require(relay), "--proximity", try #require(proximity)])
        #expect(try await phone.waitForExit(timeout: .seconds(40)) == 0, "\(phone.transcript)\n\(desktop.transcript)")
        #expect(try await desktop.waitForExit(timeout: .seconds(40)) == 0, "\(desktop.transcript)")
        #expect(desktop.standardError.text.isEmpty, "nothing reaches the closed stderr's number: \(desktop.transcript)")
        #expect(desktop.standardOutput.lines.last?.hasPrefix("{\"event\":\"result\"") == true, "\(desktop.transcript)")
        #expect(try RelyingPartyStore.load(path: lab.relyingPartyStore).credentials.count == 1)
    }

    @Test("--keylog /dev/full: the ceremony completes (exit 0) and a note says the keys are not recorded")
    func keyLogOnFullDevice() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let desktop = try await lab.startDesktop(["--request", "mc", "--keylog", "/dev/full"])
        let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url])
        #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)\n\(phone.transcript)")
        #expect(try await phone.waitForExit() == 0)
        #expect(
            desktop.process.standardError.lines.contains(
                "note: could not append to the key log /dev/full (no space left on device); this session's keys are not recorded"),
            "\(desktop.process.transcript)")
    }

    @Test("--qr-png /dev/full: exit 1 (the machine failed, as for the stores), not 2 (bad input), with the one error line")
    func qrPNGOnFullDevice() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let desktop = try lab.start("desktop", ["desktop", "--request", "mc", "--relay-port", "0", "--proximity-port", "0", "--qr-png", "/dev/full"])
        #expect(try await desktop.waitForExit(timeout: .seconds(20)) == 1, "\(desktop.transcript)")
        #expect(FailureOutput.singleErrorLine(desktop) == "error: cannot write --qr-png /dev/full: no space left on device", "\(desktop.transcript)")
    }

    @Test("qr show > /dev/full: exit 1 and an error line, not exit 0 with the code lost")
    func resultOnFullDevice() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let binary = try HybridSimBinary.url().path
        let qr = try lab.startOther("qr show", ["bash", "-c", "'\(binary)' qr show --raw hello > /dev/full"])
        #expect(try await qr.waitForExit(timeout: .seconds(20)) == 1, "\(qr.transcript)")
        #expect(qr.standardError.lines == ["error: cannot write the result to standard output: no space left on device"], "\(qr.transcript)")
    }

    @Test(
        "--version and --help > /dev/full: exit 1 and an error line (ArgumentParser's print exited 0 having printed nothing); to a pipe, exit 0",
        arguments: [["--version"], ["relay", "--help"], ["help", "rp"]])
    func helpOnFullDevice(arguments: [String]) async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let binary = try HybridSimBinary.url().path
        let words = arguments.joined(separator: " ")
        let full = try lab.startOther(words, ["bash", "-c", "'\(binary)' \(words) > /dev/full"])
        #expect(try await full.waitForExit(timeout: .seconds(20)) == 1, "\(full.transcript)")
        #expect(full.standardError.lines == ["error: cannot write the result to standard output: no space left on device"], "\(full.transcript)")
        let written = try lab.startOther(words, [binary] + arguments)
        #expect(try await written.waitForExit(timeout: .seconds(20)) == 0, "\(written.transcript)")
        #expect(!written.standardOutput.text.isEmpty && written.standardError.text.isEmpty, "\(written.transcript)")
    }
}
