import Foundation
import HybridCore
import HybridRuntime
import HybridSim
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `hybrid-sim relay` writing to a full disk (a small tmpfs, ``FullFileSystem``): what `--record`
/// loses is said.
@Suite("End to end: relay --record and --contacts on a full disk", .serialized, .enabled(if: FullFileSystem.available))
struct EndToEndRelayFullDiskTests {
    /// Opens and closes a tunnel on `url` (the creator alone): the relay records it when it closes.
    private static func openAndClose(_ url: String, tunnel byte: UInt8) async throws {
        let tunnel = try await WebSocketTunnel.open(url: url + TunnelServicePath.new(tunnelID: [UInt8](repeating: byte, count: 16)).path)
        await tunnel.close()
    }

    @Test("--record on a full disk: a warning per recording lost, and the summary at exit counts them with the last reason (and the stopped event)")
    func recordingsLost() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let disk = try FullFileSystem()
        defer { disk.tearDown() }
        disk.fill()
        let relay = try lab.start("relay --record", ["relay", "--port", "0", "--record", disk.path, "--json"])
        let ready = try await relay.waitForOutput("listening event") { !$0.isEmpty }
        let listening = try JSONEvents.parse(try #require(ready.first))
        let url = try #require(listening["url"] as? String)
        for byte: UInt8 in [1, 2] { try await Self.openAndClose(url, tunnel: byte) }
        _ = try await relay.waitForOutput("two warnings", in: \.standardError) { lines in
            lines.filter { $0.contains("could not write the tunnel recording \(disk.path)/") }.count == 2
        }
        relay.signal(SIGTERM)
        #expect(try await relay.waitForExit(timeout: .seconds(10)) == 0, "\(relay.transcript)")
        #expect(
            relay.standardError.lines.contains {
                $0.hasSuffix(
                    "since its start: 2 tunnel(s) opened, 0 joined, 0 message(s) relayed, nothing refused; "
                        + "2 recording(s) could not be written (the last: no space left on device)")
            }, "\(relay.transcript)")
        let stopped = try #require(try JSONEvents.all(relay).last)
        #expect(stopped["event"] as? String == "stopped" && stopped["recordingsNotWritten"] as? Int == 2, "\(stopped)")
    }
}
