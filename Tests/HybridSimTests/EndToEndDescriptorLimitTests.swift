import Foundation
import HybridSim
import HybridTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The programs under a small open-file limit (a hard one, which they cannot raise): one that holds
/// no tunnel ends at its start with the relay's line, exit 1, not a crash in SwiftNIO (exit 132);
/// the servers fit their connection caps to the limit, so a connection past what it holds gets a
/// fast 503 instead of an `accept` that fails while the client waits.
@Suite("End to end: the open-file limit", .serialized)
struct EndToEndDescriptorLimitTests {
    static let prlimit = "/usr/bin/prlimit"
    static let available = FileManager.default.isExecutableFile(atPath: prlimit)

    /// `hybrid-sim <arguments>` under a hard open-file limit of `limit`.
    private static func start(_ lab: EndToEndLab, limit: Int, _ arguments: [String]) throws -> ChildProcess {
        try lab.startOther(
            "\(arguments[0]) under ulimit -n \(limit)", [prlimit, "--nofile=\(limit):\(limit)", try HybridSimBinary.url().path] + arguments)
    }

    /// `count` TCP connections to 127.0.0.1:`port` that send nothing; the caller closes them.
    private static func silentConnections(_ count: Int, port: Int) -> [CInt] {
        (0..<count).compactMap { _ in LoopbackSocket.connect(port: port, ioTimeout: 5) }
    }

    /// The port of the first `…//127.0.0.1:PORT` URL in `lines`.
    private static func port(in lines: [String], scheme: String) -> Int? {
        guard let line = lines.first(where: { $0.contains(scheme + "://127.0.0.1:") }),
            let range = line.range(of: scheme + "://127.0.0.1:")
        else { return nil }
        return Int(line[range.upperBound...].prefix { $0.isNumber })
    }

    @Test(
        "any command under ulimit -n 6 (below the 16 it needs to start): one error line, exit 1, not a trap in Dispatch or SwiftNIO (exit 132)",
        .enabled(if: available))
    func belowTheStartFloor() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        for arguments in [["rp", "--profile", "okta", "--port", "0"], ["phone", "--listen", "--listen-timeout", "1"], ["qr", "show", "x", "--raw"]] {
            let process = try Self.start(lab, limit: 6, arguments)
            #expect(try await process.waitForExit() == 1, "\(process.transcript)")
            #expect(
                FailureOutput.singleErrorLine(process)
                    == "error: the open-file limit (ulimit -n) is 6; hybrid-sim needs at least 16 to start: raise the limit (ulimit -n 1024)",
                "\(process.transcript)")
        }
    }

    @Test(
        "desktop, phone, rp and demo under ulimit -n 20: one error line naming the limit, exit 1, no SwiftNIO crash",
        .enabled(if: available))
    func tooSmallToStart() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        for (arguments, holder, need) in [
            (["desktop", "--relay-port", "0", "--proximity-port", "0"], "desktop", "a tunnel needs 2"),
            (["phone", "--listen", "--listen-timeout", "1"], "phone", "a tunnel needs 2"),
            (["rp", "--profile", "okta", "--port", "0"], "rp", "it needs 2 (a request answered while another waits)"),
            (["demo"], "demo", "a tunnel needs 2"),
        ] {
            let process = try Self.start(lab, limit: 20, arguments)
            #expect(try await process.waitForExit() == 1, "\(process.transcript)")
            let line = FailureOutput.singleErrorLine(process)
            #expect(
                line == "error: the open-file limit (ulimit -n) is 20, which leaves room for 1 connection(s) beside what the \(holder) itself holds, "
                    + "and \(need): raise the limit (ulimit -n 1024 holds \(DescriptorLimit.connectionsFitting(1024)) connections)",
                "\(process.transcript)")
            #expect(!process.standardError.text.contains("Fatal error"), "\(process.transcript)")
        }
    }

    @Test("rp under a small limit: its cap fits it (a note says so), and past it a connection gets a fast 503 while silent ones hold the rest", .enabled(if: available))
    func relyingPartyFitsItsCap() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let limit = 32 + 4 * DescriptorLimit.processEventLoops + 20
        let rp = try Self.start(lab, limit: limit, ["rp", "--profile", "okta", "--port", "0"])
        let lines = try await rp.waitForOutput("ready line") { $0.contains { $0.contains("http://127.0.0.1:") } }
        let port = try #require(Self.port(in: lines, scheme: "http"))
        #expect(
            rp.standardError.text.contains("rp: note: the open-file limit (ulimit -n) is \(limit): at most 20 connection(s) at once, more get a 503"),
            "\(rp.transcript)")
        // More silent connections than the limit holds descriptors: without the cap, accept fails
        // (EMFILE) and a new client waits for its timeout.
        let silent = Self.silentConnections(limit + 20, port: port)
        defer { for fd in silent { close(fd) } }
        let started = ContinuousClock.now
        let exchange = LoopbackSocket.exchange(port: port, "GET /nothing HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n", ioTimeout: 5)
        let answer = exchange?.response ?? ""
        #expect(answer.hasPrefix("HTTP/1.1 503"), "no fast 503 (\(ContinuousClock.now - started)): \(answer)\n\(rp.transcript)")
        rp.signal(SIGTERM)
        #expect(try await rp.waitForExit(timeout: .seconds(10)) == 0, "\(rp.transcript)")
    }

    @Test(
        "the desktop's embedded relay under a small limit: fitted as hybrid-sim relay is (a note says so), a connection past it gets a 503",
        .enabled(if: available))
    func embeddedRelayFitsItsCap() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let fits = 40
        let limit = 32 + 4 * DescriptorLimit.processEventLoops + fits
        let relayCap = DescriptorLimit.embeddedRelayCap(4096, under: limit)
        #expect(relayCap == fits - fits / 4 - DescriptorLimit.desktopReserve)
        let desktop = try Self.start(
            lab, limit: limit, ["desktop", "--relay-port", "0", "--proximity-port", "0", "--timeout", "60"])
        let lines = try await desktop.waitForOutput("the embedded relay's line", in: \.standardError) {
            $0.contains { $0.contains("embedded relay listening on ws://") }
        }
        let port = try #require(Self.port(in: lines, scheme: "ws"))
        #expect(
            desktop.standardError.text.contains(
                "note: the open-file limit (ulimit -n) is \(limit): the embedded relay holds at most \(relayCap) connection(s), more get a 503"),
            "\(desktop.transcript)")
        let silent = Self.silentConnections(limit + 20, port: port)
        defer { for fd in silent { close(fd) } }
        // The relay takes a silent connection only after TCP_DEFER_ACCEPT's second (1 s, then the
        // kernel's next SYN-ACK): by then they fill its cap, or (without it) its descriptors.
        try await Task.sleep(for: .seconds(4))
        let request = "GET /cable/new/00112233445566778899aabbccddeeff HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
            + "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            + "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: fido.cable\r\n\r\n"
        let answer = LoopbackSocket.exchange(port: port, request, ioTimeout: 5)?.response ?? ""
        #expect(answer.hasPrefix("HTTP/1.1 503"), "\(answer)\n\(desktop.transcript)")
        desktop.signal(SIGTERM)
        _ = try await desktop.waitForExit(timeout: .seconds(10))
    }
}
