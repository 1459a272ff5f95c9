import Foundation
import HybridFiles
import HybridRuntime
import Testing

/// `hybrid-sim relay` as a process: the ready line, a tunnel through it, SIGTERM → exit 0.
///
/// `swift test` builds every product, so the binary sits next to the test bundle. When it is not
/// there (a filtered build of this target only) the test says so and does nothing.
@Suite("hybrid-sim relay command")
struct RelayCLITests {
    private static var binary: URL? {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("hybrid-sim")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory.deleteLastPathComponent()
        }
        return nil
    }

    @Test("prints one ws:// line, relays, and exits 0 on SIGTERM")
    func readyLineAndSignal() async throws {
        guard let binary = Self.binary else {
            print("RelayCLITests: hybrid-sim binary not built next to the tests; skipped")
            return
        }
        // Started with posix_spawn, not Foundation's Process, whose start can crash (Docs/ROBUSTNESS.md).
        let stdout = Pipe()
        let process = try ChildSpawn(
            executable: binary.path, arguments: ["relay", "--port", "0", "--log-level", "warning"],
            environment: ProcessInfo.processInfo.environment, input: nil, output: stdout.fileHandleForWriting.fileDescriptor, error: nil)
        try stdout.fileHandleForWriting.close()
        defer { process.signal(SIGKILL) }
        let output = LockedBox("")
        // A blocking reader on a thread of its own, not `readabilityHandler`, whose libdispatch
        // source races its teardown (Docs/ROBUSTNESS.md, ThreadSanitizer) and which, never cleared
        // at end of file, was called over and over with nothing to read.
        let reader = stdout.fileHandleForReading
        Thread.detachNewThread {
            while case let data = reader.availableData, !data.isEmpty {
                output.update { $0 += String(decoding: data, as: UTF8.self) }
            }
        }
        #expect(await eventually(timeout: .seconds(10)) { output.value.contains("\n") })
        let lines = output.value.split(separator: "\n")
        #expect(lines.count == 1)
        let url = try #require(
            lines.first.flatMap { $0.split(separator: " ").first { $0.hasPrefix("ws://127.0.0.1:") } }
        )
        let port = try #require(Int(url.split(separator: ":").last ?? ""))

        let ends = try await openTunnel(RelayEndpoint(host: "127.0.0.1", port: port))
        try await ends.phone.send([1, 2, 3])
        #expect(try await ends.desktop.receive(timeout: .seconds(2)) == [1, 2, 3])

        process.signal(SIGTERM)
        let error = await expectRuntimeError(.closed) { _ = try await ends.desktop.receive(timeout: .seconds(5)) }
        #expect(error?.closeCode == .goingAway)
        #expect(await eventually(timeout: .seconds(5)) { !process.isRunning })
        #expect(process.ended == .exited(0))
        await ends.close()
    }

    @Test("--help names every limit flag with its default")
    func help() async throws {
        guard let binary = Self.binary else { return }
        let stdout = Pipe()
        let process = try ChildSpawn(
            executable: binary.path, arguments: ["relay", "--help"], environment: ProcessInfo.processInfo.environment,
            input: nil, output: stdout.fileHandleForWriting.fileDescriptor, error: nil)
        try stdout.fileHandleForWriting.close()
        let data = stdout.fileHandleForReading.readDataToEndOfFile()
        #expect(await eventually(timeout: .seconds(10)) { !process.isRunning })
        #expect(process.ended == .exited(0))
        let help = String(decoding: data, as: UTF8.self)
        for fragment in [
            "--tunnel-lifetime", "(default: 120.0)", "--max-message-size", "(default: 65536)",
            "--max-messages-per-peer", "(default: 16)", "--max-tunnels", "(default: 1024)",
            "--idle-timeout", "(default: 60.0)", "--upgrade-timeout", "--log-level",
        ] {
            #expect(help.contains(fragment), "missing \(fragment)")
        }
    }

    @Test("a standard error nobody reads (a paused terminal, a stalled collector) does not stop the relay: it answers, and SIGTERM ends it")
    func unreadStandardError() async throws {
        guard let binary = Self.binary else { return }
        let stdout = Pipe()
        let stderr = Pipe()  // read only at the end
        let process = try ChildSpawn(
            executable: binary.path, arguments: ["relay", "--port", "0", "--log-level", "debug"],
            environment: ProcessInfo.processInfo.environment, input: nil, output: stdout.fileHandleForWriting.fileDescriptor,
            error: stderr.fileHandleForWriting.fileDescriptor)
        try stdout.fileHandleForWriting.close()
        try stderr.fileHandleForWriting.close()
        defer { process.signal(SIGKILL) }
        let line = stdout.fileHandleForReading.availableData
        let url = try #require(String(decoding: line, as: UTF8.self).split(separator: " ").first { $0.hasPrefix("ws://127.0.0.1:") })
        let port = try #require(Int(url.split(separator: ":").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""))

        // Each refusal is a log line of about 120 bytes at debug level: 1,000 of them fill the
        // 64 KiB pipe nobody reads, where each later line would have held an event loop.
        for _ in 0..<1_000 {
            let raw = try await RawConnection.connect(port: port)
            try await raw.write("GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n")
            let answered = await raw.waitForClose(timeout: .seconds(5))
            #expect(answered, "the relay stopped answering")
            guard answered else { return }
        }
        let last = try await RawConnection.connect(port: port)
        try await last.write("GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(RawConnection.status(of: await last.readResponseHead(timeout: .seconds(3))) == 404)

        process.signal(SIGTERM)
        // Still unread: the relay stops, and waits a bounded time for its last lines at exit.
        #expect(await eventually(timeout: .seconds(20)) { !process.isRunning }, "SIGTERM did not end the relay")
        #expect(process.ended == .exited(0))
        let text = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(text.contains("refused request: 404"), "\(text.suffix(300))")
    }
}
