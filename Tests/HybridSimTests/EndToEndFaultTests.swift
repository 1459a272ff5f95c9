import Foundation
import HybridSim
import Testing

/// Fault injection through the real binary: `desktop --relay-fault` with a phone process, and the
/// command-line errors of `--fault`, `--relay-fault` and `--misbehave` (exit 64).
@Suite("End to end: fault injection (processes)")
struct EndToEndFaultTests {
    @Test("desktop --relay-fault corrupt@to-desktop#2: the desktop reports the decryption failure (exit 7), the phone the close (exit 6)")
    func corruptThroughEmbeddedRelay() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let desktop = try await lab.startDesktop([
            "--request", "mc", "--timeout", "10", "--relay-fault", "corrupt@to-desktop#2", "--relay-fault-seed", "7",
            "--log-level", "info",
        ])
        #expect(
            desktop.process.standardError.lines.contains {
                $0 == "note: the embedded relay injects faults: corrupt@to-desktop#2 (each is logged at --log-level info)"
            }, "\(desktop.process.transcript)")
        let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url, "--timeout", "10"])
        #expect(try await desktop.process.waitForExit(timeout: .seconds(30)) == 7, "\(desktop.process.transcript)")
        #expect(
            FailureOutput.singleErrorLine(desktop.process)
                == "error: waiting for the post-handshake message: decryptionFailed: message 0 does not authenticate (tampered, reordered or wrong key)"
        )
        #expect(desktop.process.standardError.lines.contains { $0.contains("fault: corrupt message 2 to the desktop") })
        #expect(desktop.process.standardError.lines.contains { $0.contains("fault injection on this tunnel (seed 7)") })
        #expect(try await phone.waitForExit(timeout: .seconds(30)) == 6, "\(phone.transcript)")
        #expect(FailureOutput.singleErrorLine(phone).hasPrefix("error: the tunnel was closed while"), "\(phone.transcript)")
    }

    @Test(
        "bad fault and misbehaviour flags exit 64 with a precise message",
        arguments: [
            (["relay", "--fault", "explode"], "--fault: invalid fault 'explode': unknown fault 'explode'"),
            (["relay", "--fault", "drop:2"], "rate must be a probability from 0 to 1"),
            (["relay", "--fault", "delay=5"], "delay=DURATION takes a duration such as 200ms or 1.5s"),
            (["relay", "--fault", "close=1006"], "close=CODE takes a WebSocket close code an endpoint may send"),
            (["relay", "--fault", "drop@sideways"], "direction must be to-phone, to-desktop or both"),
            (["relay", "--fault-seed", "5"], "--fault-seed needs at least one --fault"),
            (["relay", "--fault", "drop", "--fault-seed", "-1"], "--fault-seed"),
            (["desktop", "--relay-fault", "truncate=x"], "--relay-fault: invalid fault 'truncate=x'"),
            (["desktop", "--relay", "ws://127.0.0.1:1", "--relay-fault", "drop"], "--relay-fault is for the embedded relay"),
            (["desktop", "--misbehave", "lie"], "--misbehave"),
            (["desktop", "--linked", "any", "--misbehave", "bad-handshake"], "--misbehave applies to the QR flow"),
            (["phone", "--qr", "FIDO:/1", "--misbehave", "lie"], "--misbehave"),
            (["phone", "--listen", "--misbehave", "wrong-psk"], "--misbehave applies to the QR flow"),
        ]
    )
    func usageErrors(arguments: [String], mention: String) async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let process = try lab.start(arguments[0], arguments)
        #expect(try await process.waitForExit(timeout: .seconds(15)) == ProgramFailure.usageExitCode, "\(process.transcript)")
        #expect(process.standardError.text.contains(mention), "\(process.transcript)")
    }
}
