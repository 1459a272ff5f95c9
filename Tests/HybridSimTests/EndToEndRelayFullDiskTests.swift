import Foundation
import HybridCore
import HybridRuntime
import HybridSim
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `hybrid-sim relay` writing to a full disk (a small tmpfs, ``FullFileSystem``): what `--record`
/// and `--contacts` lose is said, and only what is lost fails the relay.
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

    @Test("--contacts on a full disk with nothing new to save: the shutdown writes nothing and exits 0; with a phone learned meanwhile it exits 1 saying what is lost")
    func contactsOnFullDisk() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let disk = try FullFileSystem()
        defer { disk.tearDown() }
        let file = disk.path + "/contacts.json"
        let known = RelayContactMemory(known: [[UInt8](repeating: 3, count: RelayContactFile.contactIDSize)])
        try RelayContactFile.save(known, to: file)
        let before = try Data(contentsOf: URL(fileURLWithPath: file))
        disk.fill()

        let (idle, _) = try await lab.startRelay(["--contacts", file])
        idle.signal(SIGTERM)
        #expect(try await idle.waitForExit(timeout: .seconds(10)) == 0, "\(idle.transcript)")
        #expect(!idle.standardError.text.contains("error:"), "\(idle.transcript)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == before)

        let (relay, url) = try await lab.startRelay(["--contacts", file])
        let token = try #require(ListenToken(bytes: Array(repeating: 5, count: ListenToken.size)))
        var options = WebSocketTunnel.Options()
        options.extraHeaders = [(PushChannel.listenTokenHeader, token.base64URL)]
        let channel = try await WebSocketTunnel.open(
            url: url + TunnelServicePath.listenPath(contactID: token.contactID), timeout: .seconds(5), options: options)
        await channel.close()
        relay.signal(SIGTERM)
        #expect(try await relay.waitForExit(timeout: .seconds(10)) == 1, "\(relay.transcript)")
        let line = FailureOutput.singleErrorLine(relay)
        #expect(line.hasPrefix("error: --contacts: the contact memory is not saved (\(file): cannot write the store: "), "\(line)")
        #expect(
            line.hasSuffix(
                "no space left on device): the phones that listened, and the contact IDs revoked, since its last save are not in the file; "
                    + "the next start reads \(file) as it is now"), "\(line)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == before)
    }
}
