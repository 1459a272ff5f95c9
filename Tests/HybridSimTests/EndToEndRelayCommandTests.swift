import Foundation
import HybridCore
import HybridRuntime
import HybridSim
import Testing

/// `hybrid-sim relay` as an operator runs it: what it logs about its limits, its refusals and, when
/// it stops, what it did.
@Suite("End to end: the relay command's operator output", .serialized)
struct EndToEndRelayCommandTests {
    /// A status line without the time it begins with, as the log's lines do
    /// (`2026-11-27T16:56:31+0000 status: …`); a line without one comes back marked, so that
    /// comparing it fails.
    static func untimed(_ line: String) -> String {
        guard let match = line.prefixMatch(of: #/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} /#) else { return "(no time) " + line }
        return String(line[match.range.upperBound...])
    }

    /// A TCP connection to 127.0.0.1:`port` that has sent `bytes`; the caller closes it.
    private static func connect(port: Int, sending bytes: String) throws -> CInt {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ChildProcessError("socket() failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected, write(fd, bytes, bytes.utf8.count) == bytes.utf8.count else {
            close(fd)
            throw ChildProcessError("connect/write failed")
        }
        return fd
    }

    @Test("under a small open-file limit the relay lowers --max-connections with a warning; a per-source refusal is logged; stopping logs what it did")
    func limitsRefusalsAndSummary() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let binary = try HybridSimBinary.url().path
        // A hard limit too, so the relay cannot raise its soft limit past it; room for 24
        // connections whatever the number of cores (each core's event loop holds descriptors).
        let limit = 56 + 4 * DescriptorLimit.processEventLoops
        let relay = try lab.startOther(
            "relay under ulimit -n \(limit)",
            ["sh", "-c", "ulimit -n \(limit) && exec \"$0\" relay --port 0 --max-connections-per-source 2", binary])
        let lines = try await relay.waitForOutput("ready line") { $0.contains { $0.contains("ws://") } }
        let url = try #require(lines.first { $0.contains("ws://") })
        let port = try #require(url.split(separator: ":").last.flatMap { Int($0) })
        #expect(
            relay.standardError.text.contains(
                "the open-file limit (ulimit -n) is \(limit): --max-connections lowered from 4096 to 24 (12 tunnel(s)), so connections beyond it get a 503"),
            "\(relay.transcript)")

        // Two connections mid-request from 127.0.0.1, then a third over the per-source cap of 2.
        var held: [CInt] = []
        defer { for fd in held { close(fd) } }
        for _ in 0..<3 { held.append(try Self.connect(port: port, sending: "GET /cable/new/")) }
        _ = try await relay.waitForOutput("the refusal's log line", in: \.standardError) { lines in
            lines.contains { $0.contains("refused a connection from 127.0.0.1: 429 too many connections from this address (2)") }
        }
        relay.signal(SIGTERM)
        #expect(try await relay.waitForExit(timeout: .seconds(10)) == 0, "\(relay.transcript)")
        #expect(relay.standardError.text.contains("received SIGTERM, shutting down"), "\(relay.transcript)")
        #expect(
            relay.standardError.lines.last?.hasSuffix(
                "since its start: 0 tunnel(s) opened, 0 joined, 0 message(s) relayed; refused: 429 ×1") == true,
            "\(relay.transcript)")
    }

    @Test("SIGUSR1 prints a status line on stderr (whatever --log-level) and the relay goes on; SIGTERM still stops it")
    func statusSignal() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (relay, url) = try await lab.startRelay()  // --log-level warning
        // A tunnel the relay has upgraded: counted by the time open() returns.
        let tunnel = try await WebSocketTunnel.open(url: url + TunnelServicePath.new(tunnelID: [UInt8](repeating: 7, count: 16)).path)
        for round in 1...2 {
            relay.signal(SIGUSR1)
            let lines = try await relay.waitForOutput("status line \(round)", in: \.standardError) { lines in
                lines.filter { $0.contains(" status: ") }.count == round
            }
            #expect(
                lines.last { $0.contains(" status: ") }.map(Self.untimed)
                    == "status: 1 connection(s) and 1 tunnel(s) open, 0 contact request(s) waiting for their phone; "
                    + "since its start: 1 tunnel(s) opened, 0 joined, 0 message(s) relayed, nothing refused",
                "\(relay.transcript)")
            #expect(relay.isRunning)
        }
        await tunnel.close()
        relay.signal(SIGTERM)
        #expect(try await relay.waitForExit(timeout: .seconds(10)) == 0, "\(relay.transcript)")
    }

    @Test("--json: a listening event with the url, status events every --status-interval with the counters, a stopped event last; stderr keeps its lines")
    func jsonEvents() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let relay = try lab.start(
            "relay --json", ["relay", "--port", "0", "--json", "--status-interval", "0.2", "--log-level", "warning"])
        let first = try await relay.waitForOutput("listening event") { !$0.isEmpty }
        let listening = try JSONEvents.parse(try #require(first.first))
        #expect(listening["event"] as? String == "listening", "\(relay.transcript)")
        let url = try #require(listening["url"] as? String)
        #expect(url.hasPrefix("ws://127.0.0.1:"), "\(url)")
        // A tunnel held open, then a refused request (a connect to an unknown tunnel: 404).
        let tunnel = try await WebSocketTunnel.open(url: url + TunnelServicePath.new(tunnelID: [UInt8](repeating: 9, count: 16)).path)
        await #expect(throws: (any Error).self) {
            _ = try await WebSocketTunnel.open(
                url: url + TunnelServicePath.connect(routingID: [1, 2, 3], tunnelID: [UInt8](repeating: 8, count: 16)).path)
        }
        // The periodic events alone (no SIGUSR1 yet) come back with the tunnel and the refusal in them.
        let periodic = try await relay.waitForOutput("a status event with the tunnel") { lines in
            lines.contains { $0.contains("\"event\":\"status\"") && $0.contains("\"refused\":{\"404\":1}") }
        }
        let status = try JSONEvents.parse(try #require(periodic.last { $0.contains("\"refused\":{\"404\":1}") }))
        #expect(status["tunnels"] as? Int == 1 && status["connections"] as? Int == 1 && status["tunnelsOpened"] as? Int == 1)
        #expect(status["tunnelsJoined"] as? Int == 0 && status["waitingContacts"] as? Int == 0)
        #expect(relay.standardError.lines.contains { Self.untimed($0).hasPrefix("status: 1 connection(s) and 1 tunnel(s) open") }, "\(relay.transcript)")
        await tunnel.close()
        relay.signal(SIGTERM)
        #expect(try await relay.waitForExit(timeout: .seconds(10)) == 0, "\(relay.transcript)")
        let events = try JSONEvents.all(relay)
        let stopped = try #require(events.last)
        #expect(stopped["event"] as? String == "stopped" && stopped["signal"] as? String == "SIGTERM", "\(relay.transcript)")
        #expect(stopped["tunnels"] as? Int == 0 && stopped["tunnelsOpened"] as? Int == 1)
        #expect((stopped["refused"] as? [String: Int]) == ["404": 1])
        #expect((stopped["tunnelsClosed"] as? [String: Int])?.isEmpty == false, "\(relay.transcript)")
        #expect(events.dropLast().allSatisfy { ["listening", "status"].contains($0["event"] as? String) })
    }

    @Test("--json without --status-interval: a status event only when SIGUSR1 asks, one per signal")
    func jsonStatusOnSignal() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let relay = try lab.start("relay --json", ["relay", "--port", "0", "--json", "--log-level", "warning"])
        _ = try await relay.waitForOutput("listening event") { !$0.isEmpty }
        try await Task.sleep(for: .milliseconds(300))
        #expect(relay.standardOutput.lines.count == 1, "\(relay.transcript)")
        relay.signal(SIGUSR1)
        let lines = try await relay.waitForOutput("status event") { $0.count == 2 }
        let status = try JSONEvents.parse(lines[1])
        #expect(status["event"] as? String == "status" && status["connections"] as? Int == 0, "\(relay.transcript)")
        relay.signal(SIGTERM)
        #expect(try await relay.waitForExit(timeout: .seconds(10)) == 0, "\(relay.transcript)")
        #expect(try JSONEvents.all(relay).map { $0["event"] as? String } == ["listening", "status", "stopped"])
    }

    @Test("a refused request's log line names the method and target with its tunnel ID cut (never logged whole), so a connect with an ID written another way shows it")
    func refusalNamesTheRequest() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let relay = try lab.start("relay", ["relay", "--port", "0"])
        let lines = try await relay.waitForOutput("ready line") { $0.contains { $0.contains("ws://") } }
        let url = try #require(lines.first { $0.contains("ws://") }.flatMap { $0.split(separator: " ").last.map(String.init) })
        let path = TunnelServicePath.connect(routingID: [1, 2, 3], tunnelID: [UInt8](repeating: 8, count: 16)).path
        await #expect(throws: (any Error).self) { _ = try await WebSocketTunnel.open(url: url + path) }
        _ = try await relay.waitForOutput("the refusal's log line", in: \.standardError) { lines in
            lines.contains { $0.hasSuffix("refused request: 404 unknown tunnel or routing ID (GET /cable/connect/010203/0808…(32))") }
        }
        #expect(!relay.standardError.text.contains("08080808080808"), "a tunnel ID was logged whole: \(relay.transcript)")
        relay.signal(SIGTERM)
        #expect(try await relay.waitForExit(timeout: .seconds(10)) == 0, "\(relay.transcript)")
    }

    @Test("--json: a port it cannot bind is an error event (network, exit 6) as well as the error line")
    func jsonBindFailure() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (holder, port) = try EndToEndLab.boundSocket(listening: true)
        defer { close(holder) }
        let relay = try lab.start("relay --json on a taken port", ["relay", "--port", "\(port)", "--json"])
        #expect(try await relay.waitForExit() == 6, "\(relay.transcript)")
        let event = try #require(try JSONEvents.all(relay).last, "\(relay.transcript)")
        #expect(event["event"] as? String == "error" && event["kind"] as? String == "network" && event["exitCode"] as? Int == 6)
        #expect(relay.standardError.lines.last == "error: \(event["message"] as? String ?? "?")", "\(relay.transcript)")
    }

    @Test("--host [::1], as a URL writes it, binds ::1")
    func bracketedHost() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let relay = try lab.start("relay", ["relay", "--host", "[::1]", "--port", "0"])
        let lines = try await relay.waitForOutput("ready line") { $0.contains { $0.contains("ws://") } }
        #expect(lines.contains { $0.hasPrefix("hybrid-sim relay listening on ws://[::1]:") }, "\(relay.transcript)")
        relay.signal(SIGTERM)
        #expect(try await relay.waitForExit(timeout: .seconds(10)) == 0, "\(relay.transcript)")
    }
}
