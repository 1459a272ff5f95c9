import Foundation
import HybridFiles
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
        // Started with posix_spawn, not Foundation's Process, whose start can crash (Docs/ROBUSTNESS.md).
        let pipe = Pipe()
        let parent = try ChildSpawn(
            executable: "/bin/sh", arguments: ["-c", "sleep 60 & echo $!; exec sleep 60"], environment: [:],
            input: nil, output: pipe.fileHandleForWriting.fileDescriptor, error: nil)
        try pipe.fileHandleForWriting.close()
        defer { parent.signal(SIGKILL) }
        let line = String(decoding: pipe.fileHandleForReading.availableData, as: UTF8.self)
        let pid = try #require(Int32(line.trimmingCharacters(in: .whitespacesAndNewlines)), "\(line)")
        #expect(throws: Never.self) { _ = try ProcessProbe(pid: pid).sample() }
        // Killed only once the shell has become `sleep`, which never reaps: the shell itself may
        // reap a child that ends before its exec (it gets SIGCHLD, since ChildSpawn's children
        // block no signal).
        let execed = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < execed,
            (try? String(contentsOfFile: "/proc/\(parent.pid)/comm", encoding: .utf8))?.hasPrefix("sleep") != true
        {
            try await Task.sleep(for: .milliseconds(5))
        }
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
