import Foundation
import HybridCore
import HybridRuntime
import HybridSim
import Testing

/// `hybrid-sim relay` as an operator runs it: what it logs about its limits, its refusals and, when
/// it stops, what it did.
@Suite("End to end: the relay command's operator output", .serialized)
struct EndToEndRelayCommandTests {
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
                "the open-file limit (ulimit -n) is \(limit): --max-connections lowered from 4096 to 24, so connections beyond it get a 503"),
            "\(relay.transcript)")

        // Two connections mid-request from 127.0.0.1, then a third over the per-source cap of 2.
        var held: [CInt] = []
        defer { for fd in held { close(fd) } }
        for _ in 0..<3 { held.append(try Self.connect(port: port, sending: "GET /cable/new/")) }
        _ = try await relay.waitForOutput("the refusal's log line", in: \.standardError) { lines in
            lines.contains { $0.contains("refused a connection: 429 too many connections from this address (2)") }
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
                lines.filter { $0.hasPrefix("status: ") }.count == round
            }
            #expect(
                lines.last { $0.hasPrefix("status: ") }
                    == "status: 1 connection(s) and 1 tunnel(s) open, 0 contact request(s) waiting for their phone; "
                    + "since its start: 1 tunnel(s) opened, 0 joined, 0 message(s) relayed, nothing refused",
                "\(relay.transcript)")
            #expect(relay.isRunning)
        }
        await tunnel.close()
        relay.signal(SIGTERM)
        #expect(try await relay.waitForExit(timeout: .seconds(10)) == 0, "\(relay.transcript)")
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
