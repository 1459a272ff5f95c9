import Foundation
import HybridRuntime
import Testing

/// The `/proc` reader behind `bench relay --relay-pid`.
@Suite("Process probe")
struct ProcessProbeTests {
    @Test("a process that ended but was not reaped yet (a zombie) is reported as ended, not sampled")
    func zombieEnded() async throws {
        // sh starts a short sleep in the background, prints its pid, then becomes a long sleep that
        // never waits for it: the short one stays a zombie until the long one ends.
        let parent = Process()
        parent.executableURL = URL(fileURLWithPath: "/bin/sh")
        parent.arguments = ["-c", "sleep 0.1 & echo $!; exec sleep 10"]
        let pipe = Pipe()
        parent.standardOutput = pipe
        try parent.run()
        defer { parent.terminate() }
        let line = String(decoding: pipe.fileHandleForReading.availableData, as: UTF8.self)
        let pid = try #require(Int32(line.trimmingCharacters(in: .whitespacesAndNewlines)), "\(line)")
        #expect(throws: Never.self) { _ = try ProcessProbe(pid: pid).sample() }
        try await Task.sleep(for: .milliseconds(500))
        do {
            _ = try ProcessProbe(pid: pid).sample()
            Issue.record("a zombie was sampled as if it ran")
        } catch {
            #expect("\(error)" == "the measured process \(pid) ended during the run (it is a zombie, not yet reaped)")
        }
    }
}
