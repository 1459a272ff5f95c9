import Foundation
import HybridRuntime
import Testing

/// The `/proc` reader behind `bench relay --relay-pid`.
@Suite("Process probe")
struct ProcessProbeTests {
    @Test("a process that ended but was not reaped yet (a zombie) is reported as ended, not sampled")
    func zombieEnded() async throws {
        // sh starts a long sleep in the background, prints its pid, then becomes another long sleep
        // that never waits for it: once the test kills the first, it stays a zombie until the second
        // ends. (No timer in the child: a cold machine may take longer than any fixed delay.)
        let parent = Process()
        parent.executableURL = URL(fileURLWithPath: "/bin/sh")
        parent.arguments = ["-c", "sleep 60 & echo $!; exec sleep 60"]
        let pipe = Pipe()
        parent.standardOutput = pipe
        try parent.run()
        defer { parent.terminate() }
        let line = String(decoding: pipe.fileHandleForReading.availableData, as: UTF8.self)
        let pid = try #require(Int32(line.trimmingCharacters(in: .whitespacesAndNewlines)), "\(line)")
        #expect(throws: Never.self) { _ = try ProcessProbe(pid: pid).sample() }
        kill(pid, SIGKILL)
        let deadline = ContinuousClock.now + .seconds(10)
        var reported: String?
        while reported == nil, ContinuousClock.now < deadline {
            do {
                _ = try ProcessProbe(pid: pid).sample()
                try await Task.sleep(for: .milliseconds(20))  // killed, not yet a zombie
            } catch {
                reported = "\(error)"
            }
        }
        #expect(reported == "the measured process \(pid) ended during the run (it is a zombie, not yet reaped)")
    }
}
