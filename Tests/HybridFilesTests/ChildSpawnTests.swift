import Foundation
import HybridFiles
import Synchronization
import Testing

/// `ChildSpawn`, the posix_spawn launcher `hybrid-sim demo` and the end-to-end tests start their
/// children with (Foundation's `Process.run()` can crash on Linux: `ChildSpawn` says why).
@Suite("Child processes started with posix_spawn", .timeLimit(.minutes(1)))
struct ChildSpawnTests {
    /// Waits (a condition poll with a deadline) for `child` to end.
    private static func end(of child: ChildSpawn) async throws -> ChildSpawn.Ending? {
        let deadline = ContinuousClock.now + .seconds(10)
        while child.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        return child.ended
    }

    private static func shell(_ script: String, output: Int32? = nil) throws -> ChildSpawn {
        try ChildSpawn(executable: "/bin/sh", arguments: ["-c", script], environment: ["PATH": "/usr/bin:/bin"], input: nil, output: output, error: nil)
    }

    @Test("an exit status, and a death by signal, are told apart; onEnd runs once, late or early")
    func endings() async throws {
        let exited = try Self.shell("exit 7")
        #expect(try await Self.end(of: exited) == .exited(7))
        let calls = Mutex(0)
        exited.onEnd { _ in calls.withLock { $0 += 1 } }  // already ended: at once
        #expect(calls.withLock { $0 } == 1)

        let sleeper = try Self.shell("sleep 30")
        let told = Mutex<ChildSpawn.Ending?>(nil)
        sleeper.onEnd { end in told.withLock { $0 = end } }
        sleeper.signal(SIGKILL)
        #expect(try await Self.end(of: sleeper) == .killed(signal: SIGKILL))
        let deadline = ContinuousClock.now + .seconds(5)
        while told.withLock({ $0 }) == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(told.withLock { $0 } == .killed(signal: SIGKILL))
        sleeper.signal(SIGTERM)  // after its end: nothing is sent to a process ID that may be another's
    }

    @Test("the child gets exactly the given environment, /dev/null for what is not given, and no other descriptor of ours")
    func descriptorsAndEnvironment() async throws {
        let pipe = Pipe()
        // A descriptor of ours without close-on-exec, as Foundation's Pipe makes them: not the child's.
        let leaked = Pipe()
        defer { try? leaked.fileHandleForWriting.close() }
        let child = try ChildSpawn(
            executable: "/bin/sh",
            arguments: ["-c", #"echo "$ONLY" "${HOME:-none}"; ls /proc/self/fd | tr '\n' ' '; echo; read line || echo eof"#],
            environment: ["ONLY": "yes"], input: nil, output: pipe.fileHandleForWriting.fileDescriptor, error: nil)
        try pipe.fileHandleForWriting.close()
        let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(try await Self.end(of: child) == .exited(0))
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.first == "yes none", "\(text)")
        // 0, 1, 2 and the one ls opens for /proc/self/fd: nothing inherited.
        let descriptors = lines.dropFirst().first?.split(separator: " ").compactMap { Int($0) } ?? []
        #expect(descriptors.filter { $0 > 2 }.count <= 1, "\(text)")
        #expect(!descriptors.contains(Int(leaked.fileHandleForWriting.fileDescriptor)), "\(text)")
        #expect(lines.last == "eof", "standard input is /dev/null: \(text)")
    }

    @Test("ChildSpawn.pipe: both ends close-on-exec from the start; the child still gets its end as standard output")
    func closeOnExecPipe() async throws {
        let (reading, writing) = try #require(ChildSpawn.pipe())
        defer { close(reading) }
        for end in [reading, writing] {
            #expect(fcntl(end, F_GETFD) & FD_CLOEXEC != 0, "descriptor \(end) is inherited by every program this process starts")
        }
        let child = try ChildSpawn(
            executable: "/bin/sh", arguments: ["-c", "echo through"], environment: [:], input: nil, output: writing, error: nil)
        close(writing)
        #expect(try await Self.end(of: child) == .exited(0))
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = read(reading, &buffer, buffer.count)
        #expect(count > 0 && String(decoding: buffer[0..<count], as: UTF8.self) == "through\n", "the child's standard output did not arrive")
    }

    @Test("the child starts with no signal blocked, however the spawning thread's mask is (a perl filter once ignored SIGTERM), and SIGPIPE not ignored")
    func signalMaskReset() async throws {
        let (reading, writing) = try #require(ChildSpawn.pipe())
        defer { close(reading) }
        // The spawning thread blocks SIGTERM and SIGINT, as threads of Swift concurrency's pool may.
        var blocked = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGTERM)
        sigaddset(&blocked, SIGINT)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &blocked, &previous)
        let child = Result {
            try ChildSpawn(
                executable: "/bin/sh", arguments: ["-c", #"exec grep -E "^Sig(Blk|Ign)" /proc/self/status"#], environment: [:],
                input: nil, output: writing, error: nil)
        }
        pthread_sigmask(SIG_SETMASK, &previous, nil)
        close(writing)
        #expect(try await Self.end(of: try child.get()) == .exited(0))
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = max(0, read(reading, &buffer, buffer.count))
        let lines = String(decoding: buffer[0..<count], as: UTF8.self).split(separator: "\n")
        let masks = Dictionary(uniqueKeysWithValues: lines.map { line in
            (String(line.prefix { $0 != ":" }), UInt64(line.split(separator: "\t").last ?? "", radix: 16) ?? .max)
        })
        #expect(masks["SigBlk"] == 0, "the child inherited blocked signals: \(lines)")
        #expect((masks["SigIgn"] ?? .max) & (1 << (UInt64(SIGPIPE) - 1)) == 0, "the child ignores SIGPIPE: \(lines)")
    }

    @Test("a program that is not there is an error naming it, and no child")
    func missingProgram() {
        #expect {
            _ = try ChildSpawn(executable: "/nonexistent/program", arguments: [], environment: [:], input: nil, output: nil, error: nil)
        } throws: { error in
            (error as? SpawnError)?.description == "cannot start /nonexistent/program: No such file or directory"
        }
    }
}
