import Foundation
import HybridRuntime
import Logging
import Synchronization
import Testing

/// Records every log line (level and message) for the assertions below.
private struct RecordingLogHandler: LogHandler {
    let lines: LockedBox<[(Logger.Level, String)]>
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        lines.update { $0.append((event.level, "\(event.message)")) }
    }
}

@Suite("Relay logs: peer text escaped, info lines rate-limited")
struct RelayLogTests {
    @Test("peer text is escaped: no newline, escape sequence or quote reaches a log line as is")
    func escaping() {
        #expect(PeerText.loggable("plain reason 1") == "plain reason 1")
        #expect(PeerText.loggable("a\nb") == "a\\u{A}b")
        #expect(PeerText.loggable("\u{1B}[31mred") == "\\u{1B}[31mred")
        #expect(PeerText.loggable("say \"hi\" \\") == "say \\\"hi\\\" \\\\")
        #expect(PeerText.loggable("é") == "\\u{E9}")
        let long = PeerText.loggable(String(repeating: "x", count: 1000))
        #expect(long == String(repeating: "x", count: PeerText.defaultLimit) + "…")
        let exact = String(repeating: "x", count: PeerText.defaultLimit)
        #expect(PeerText.loggable(exact) == exact, "nothing cut, no ellipsis")
    }

    @Test("a burst of info lines: the budget passes, the rest go to debug and are counted")
    func rateLimit() {
        let lines = LockedBox<[(Logger.Level, String)]>([])
        let logger = Logger(label: "test", factory: { _ in RecordingLogHandler(lines: lines) })
        let limiter = RelayLogLimiter()
        for index in 0..<500 { limiter.info(logger, "line \(index)") }
        let recorded = lines.value
        let info = recorded.filter { $0.0 == .info }.count
        #expect(recorded.count == 500)
        #expect(info >= Int(RelayLogLimiter.burst))
        #expect(info < 200, "\(info) info lines for 500 calls in a tight loop")
    }

    @Test("a close reason with a newline is logged escaped by a running relay")
    func closeReasonEscaped() async throws {
        let lines = LockedBox<[(Logger.Level, String)]>([])
        let logger = Logger(label: "relay", factory: { _ in RecordingLogHandler(lines: lines) })
        let relay = TunnelRelay(configuration: RelayConfiguration(), logger: logger)
        let endpoint = try await relay.start()
        let ends = try await openTunnel(endpoint)
        try await ends.phone.sendFrame(
            opcode: .connectionClose, data: [0x03, 0xE8] + Array("bye\ninfo: forged line".utf8))
        _ = try? await ends.desktop.receive(timeout: .seconds(3))
        await ends.close()
        await relay.shutdown()
        let closed = lines.value.map(\.1).filter { $0.contains("tunnel closed") }
        #expect(closed.contains { $0.contains("bye\\u{A}info: forged line") }, "\(closed)")
        #expect(!lines.value.contains { $0.1.contains("\n") })
    }

    @Test("a recording that cannot be written is a warning that says why; the relay goes on")
    func recordingUnwritable() async throws {
        let (directory, lines, relay, endpoint) = try await Self.recordingRelay("unwritable")
        let ends = try await openTunnel(endpoint)
        try FileManager.default.removeItem(atPath: directory)  // gone before the tunnel closes
        await ends.close()
        let second = try await openTunnel(endpoint)  // still relaying
        await second.close()
        await relay.shutdown()
        let warnings = lines.value.filter { $0.0 == .warning }.map(\.1)
        #expect(
            warnings.contains { $0.hasPrefix("could not write the tunnel recording \(directory)/") && $0.hasSuffix("the directory \(directory) does not exist") },
            "\(warnings)")
        #expect(!FileManager.default.fileExists(atPath: directory), "nothing recreated")
    }

    @Test("\"tunnel recorded to\" lines share the info budget: past it they go to debug, none is lost")
    func recordedLinesAreBudgeted() async throws {
        // One shard, so one budget: with a shard per core the lines spread over several buckets,
        // and a slow run refills them (20 lines a second) faster than 40 tunnels spend them.
        let (directory, lines, relay, endpoint) = try await Self.recordingRelay("budget", eventLoops: 1)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let tunnels = 40  // with their opened, attached and closed lines (about 200), well over the burst of 50
        for _ in 0..<tunnels {
            let ends = try await openTunnel(endpoint)
            await ends.close()
        }
        await relay.shutdown()
        let recorded = lines.value.filter { $0.1.hasPrefix("tunnel recorded to ") }
        #expect(recorded.count == tunnels, "one line per recording, at one level or the other")
        #expect(recorded.contains { $0.0 == .debug }, "past the budget: debug")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).count == tunnels)
    }

    /// A started relay that records into a new directory and logs into `lines`.
    private static func recordingRelay(_ name: String, eventLoops: Int = 0) async throws
        -> (directory: String, lines: LockedBox<[(Logger.Level, String)]>, relay: TunnelRelay, endpoint: RelayEndpoint)
    {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let lines = LockedBox<[(Logger.Level, String)]>([])
        let logger = Logger(label: "relay", factory: { _ in RecordingLogHandler(lines: lines) })
        var configuration = RelayConfiguration()
        configuration.recordDirectory = directory
        configuration.eventLoops = eventLoops
        let relay = TunnelRelay(configuration: configuration, logger: logger)
        return (directory, lines, relay, try await relay.start())
    }
}
