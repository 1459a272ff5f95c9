import CTAP2
import Foundation
import HybridCore
import HybridSim
import Synchronization
import Testing

/// A request bigger than a relay carries in one message (64 KiB for hybrid-sim relay): refused
/// before the QR code is shown with the embedded relay, noted with another one. The relay's 1009,
/// after the phone had scanned and answered the handshake, used to be the first word of it.
@Suite("Desktop: a request too big for the relay", .timeLimit(.minutes(1)))
struct DesktopRequestSizeTests {
    /// Registration options excluding `count` credentials of 16 bytes.
    private static func options(excluding count: Int, displayName: String = "Zed") throws -> String {
        func id() -> String { Base64URL.encode(RandomSource.system.bytes(16)) }
        let document: [String: Any] = [
            "rp": ["id": "example.com", "name": "Example"],
            "user": ["id": id(), "name": "zed", "displayName": displayName],
            "challenge": Base64URL.encode(RandomSource.system.bytes(32)),
            "pubKeyCredParams": [["type": "public-key", "alg": -7]],
            "excludeCredentials": (0..<count).map { _ in ["type": "public-key", "id": id()] },
        ]
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("hybridsim-big-\(UUID().uuidString).json").path
        try JSONSerialization.data(withJSONObject: document).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// A registration with `options` in a fresh home (the caller removes both).
    private static func configuration(options: String) -> (DesktopConfiguration, home: String) {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("hybridsim-big-\(UUID().uuidString)").path
        var desktop = DesktopConfiguration()
        desktop.environment = ["HYBRID_SIM_HOME": home]
        desktop.request = .makeCredential
        desktop.optionsFile = options
        desktop.proximityPort = 0
        desktop.timeout = .seconds(1)
        return (desktop, home)
    }

    @Test("with the embedded relay: exit 2 before the QR code, naming the size, the limit and the list")
    func embeddedRelayRefusesAtOnce() async throws {
        let path = try Self.options(excluding: 3_000)
        var (desktop, home) = Self.configuration(options: path)
        defer {
            try? FileManager.default.removeItem(atPath: path)
            try? FileManager.default.removeItem(atPath: home)
        }
        desktop.relay = .embedded(port: 0)
        let shown = Mutex(false)
        let failure = await #expect(throws: ProgramFailure.self) {
            _ = try await DesktopProgram.run(desktop, output: .discarding) { _ in shown.withLock { $0 = true } }
        }
        #expect(failure?.kind == .badInput)
        #expect(
            failure?.message
                == "the makeCredential request is 111184 bytes encrypted (111148 of CTAP2, with 3000 excludeCredentials), more than the embedded relay carries in one message (65536 bytes): list fewer credentials, or shorten the options (user and relying-party names, display names)",
            "\(String(describing: failure))")
        #expect(!shown.withLock { $0 }, "no QR code was shown")
    }

    @Test("with another relay: a note, and the ceremony goes on; a request that fits gets no note")
    func externalRelayIsWarned() async throws {
        for (count, noted) in [(3_000, true), (100, false)] {
            let path = try Self.options(excluding: count)
            var (desktop, home) = Self.configuration(options: path)
            defer {
                try? FileManager.default.removeItem(atPath: path)
                try? FileManager.default.removeItem(atPath: home)
            }
            desktop.relay = .external(url: "ws://127.0.0.1:9")  // nothing there; the wait for a phone times out
            let lines = Mutex<[String]>([])
            let output = ProgramOutput(standardOutput: { _ in }, standardError: { line in lines.withLock { $0.append(line) } })
            let failure = await #expect(throws: ProgramFailure.self) {
                _ = try await DesktopProgram.run(desktop, output: output) { _ in }
            }
            #expect(failure?.kind == .timeout, "the ceremony went on to wait for a phone")
            let note = lines.withLock { $0 }.first { $0.contains("bytes encrypted") }
            if noted {
                #expect(note?.hasSuffix("so the relay at ws://127.0.0.1:9 may close the tunnel with 1009") == true, "\(String(describing: note))")
            } else {
                #expect(note == nil)
            }
        }
    }

    @Test("a request too big without any credential list is told to shorten the options, not to list fewer credentials")
    func bigWithoutAList() async throws {
        let path = try Self.options(excluding: 0, displayName: String(repeating: "z", count: 70_000))
        var (desktop, home) = Self.configuration(options: path)
        defer {
            try? FileManager.default.removeItem(atPath: path)
            try? FileManager.default.removeItem(atPath: home)
        }
        desktop.relay = .embedded(port: 0)
        let failure = await #expect(throws: ProgramFailure.self) {
            _ = try await DesktopProgram.run(desktop, output: .discarding) { _ in }
        }
        #expect(failure?.kind == .badInput)
        #expect(failure?.message.hasSuffix("with 0 excludeCredentials), more than the embedded relay carries in one message (65536 bytes): shorten the options (user and relying-party names, display names)") == true, "\(String(describing: failure))")
    }
}
