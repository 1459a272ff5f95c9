import Foundation
@testable import HybridSim
import Synchronization
import Testing

/// `hybrid-sim demo` reads its children's output with every wait bounded: a desktop that prints
/// nothing and never ends (a hung program) is stopped at the step's limit, and the demo says so.
/// The desktop here is a shell script standing in for `hybrid-sim`, so the test needs no hang of
/// the real program.
@Suite("Demo: a silent, hung desktop", .serialized, .timeLimit(.minutes(1)))
struct DemoStepLimitTests {
    @Test("a desktop that never prints its QR code and never exits: error at the step's limit, exit 3, the child stopped")
    func silentDesktop() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("demo-hung-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let script = directory + "/hung"
        let pidFile = directory + "/pid"
        // Ignores SIGTERM too (as a hung process may), so the stop must go on to SIGKILL.
        try "#!/bin/sh\necho $$ > \(pidFile)\ntrap '' TERM\nwhile :; do sleep 1; done\n".write(toFile: script, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: script)
        var configuration = DemoProgram.Configuration(executable: script)
        configuration.timeout = .seconds(1)
        configuration.home = directory + "/home"
        let errors = Mutex<[String]>([])
        let output = ProgramOutput(standardOutput: { _ in }, standardError: { line in errors.withLock { $0.append(line) } })
        let start = ContinuousClock.now
        let status = await DemoProgram.main(configuration, output: output)
        let took = ContinuousClock.now - start
        let lines = errors.withLock { $0 }
        #expect(status == 3, "\(lines)")
        #expect(lines.last == "error: the desktop did not print its QR code and proximity port within 1 s", "\(lines)")
        #expect(took < .seconds(10), "the step's limit (1 s) and the stop (2 s to SIGKILL) bound it: took \(took)")
        let pid = try #require(Int32(String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(kill(pid, 0) != 0, "the hung desktop (pid \(pid)) was stopped")
    }
}
