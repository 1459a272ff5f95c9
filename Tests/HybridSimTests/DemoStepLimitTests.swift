import Foundation
@testable import HybridSim
import Synchronization
import Testing

/// `hybrid-sim demo` reads its children's output with every wait bounded: a desktop that prints
/// nothing and never ends (a hung program) is stopped at the step's limit, one that hangs after its
/// QR code at the ceremony's, and the demo says so. The children here are a shell script standing
/// in for `hybrid-sim`, so the tests need no hang of the real program.
@Suite("Demo: a silent, hung desktop", .serialized, .timeLimit(.minutes(1)))
struct DemoStepLimitTests {
    /// What a demo run with `script` (the body of a shell script that gets the child's arguments)
    /// as `hybrid-sim` did: its status, its stderr lines, how long it took, and the process IDs
    /// the script's runs wrote to `$PIDS`.
    static func demo(script body: String, timeout: Duration, hangGrace: Duration) async throws
        -> (status: Int32, lines: [String], took: Duration, pids: [Int32])
    {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("demo-hung-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let script = directory + "/hybrid-sim"
        try "#!/bin/sh\nPIDS=\(directory)/pids\necho $$ >> $PIDS\n\(body)".write(toFile: script, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: script)
        var configuration = DemoProgram.Configuration(executable: script)
        configuration.timeout = timeout
        configuration.hangGrace = hangGrace
        configuration.home = directory + "/home"
        let errors = Mutex<[String]>([])
        let output = ProgramOutput(standardOutput: { _ in }, standardError: { line in errors.withLock { $0.append(line) } })
        let start = ContinuousClock.now
        let status = await DemoProgram.main(configuration, output: output)
        let took = ContinuousClock.now - start
        let pids = try String(contentsOfFile: directory + "/pids", encoding: .utf8).split(separator: "\n").compactMap { Int32($0) }
        return (status, errors.withLock { $0 }, took, pids)
    }

    @Test("a desktop that never prints its QR code and never exits: error at the step's limit, exit 3, the child stopped")
    func silentDesktop() async throws {
        // Ignores SIGTERM too (as a hung process may), so the stop must go on to SIGKILL.
        let run = try await Self.demo(script: "trap '' TERM\nwhile :; do sleep 1; done\n", timeout: .seconds(1), hangGrace: .seconds(60))
        #expect(run.status == 3, "\(run.lines)")
        #expect(run.lines.last == "error: the desktop did not print its QR code and proximity port within 1 s", "\(run.lines)")
        #expect(run.took < .seconds(10), "the step's limit (1 s) and the stop (2 s to SIGKILL) bound it: took \(run.took)")
        #expect(run.pids.count == 1 && run.pids.allSatisfy { kill($0, 0) != 0 }, "the hung desktop was stopped: \(run.pids)")
    }

    @Test("a desktop that printed its QR code and then hangs past all its waits: stopped with the phone, error naming the limit, exit 3")
    func hungAfterTheQRCode() async throws {
        // As the desktop: a QR line and the proximity line, then a hang that ignores SIGTERM; as
        // the phone: a plain wait.
        let script = """
            if [ "$1" = desktop ]; then
              echo FIDO:/123456789012345678
              echo "proximity scanner listening on udp://127.0.0.1:9 (simulated RSSI)" >&2
              trap '' TERM
            fi
            while :; do sleep 1; done

            """
        let run = try await Self.demo(script: script, timeout: .seconds(1), hangGrace: .seconds(1))
        #expect(run.status == 3, "\(run.lines)")
        #expect(run.lines.last == "error: registration failed: the desktop did not finish within 4 s; the demo stopped it", "\(run.lines)")
        #expect(run.took < .seconds(15), "3 × 1 s + 1 s, then 2 s to SIGKILL: took \(run.took)")
        #expect(run.pids.count == 2 && run.pids.allSatisfy { kill($0, 0) != 0 }, "a desktop and a phone, both stopped: \(run.pids)")
    }
}
