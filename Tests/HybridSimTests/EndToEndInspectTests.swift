import Foundation
import Testing

/// `relay --record`, `desktop`/`phone --keylog` and `inspect` as a person runs them: real processes,
/// a real registration, then the inspector's exit statuses and outputs.
@Suite("End to end: record, key log, inspect", .serialized, .timeLimit(.minutes(2)))
struct EndToEndInspectTests {
    @Test func recordKeylogAndInspect() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let recordings = lab.file("rec")
        try FileManager.default.createDirectory(atPath: recordings, withIntermediateDirectories: true)
        let relay = try lab.start("relay", ["relay", "--port", "0", "--log-level", "warning", "--record", recordings])
        let ready = try await relay.waitForOutput("ready line") { $0.contains { $0.contains("ws://") } }
        let relayURL = try #require(ready.first { $0.contains("ws://") }?.split(separator: " ").first { $0.hasPrefix("ws://") }).description

        let desktopKeys = lab.file("desktop-keys.log")
        let phoneKeys = lab.file("phone-keys.log")
        // An existing key log that others could read is made private before any key goes in.
        #expect(FileManager.default.createFile(atPath: phoneKeys, contents: nil, attributes: [.posixPermissions: 0o644]))
        let desktop = try await lab.startDesktop(["--request", "mc", "--relay", relayURL, "--keylog", desktopKeys], json: true)
        let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url, "--keylog", phoneKeys])
        #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)\n\(phone.transcript)")
        #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")

        // Both sides logged the same line; the file is private.
        let desktopLog = try String(contentsOfFile: desktopKeys, encoding: .utf8)
        #expect(desktopLog.hasPrefix("HYBRID_SESSION_KEYS ") && desktopLog.split(separator: "\n").count == 1)
        #expect(try String(contentsOfFile: phoneKeys, encoding: .utf8) == desktopLog)
        for path in [desktopKeys, phoneKeys] {
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
            #expect(mode == 0o600, "\(path)")
        }

        var names: [String] = []
        let deadline = ContinuousClock.now + .seconds(10)
        while names.isEmpty && ContinuousClock.now < deadline {
            names = try FileManager.default.contentsOfDirectory(atPath: recordings).filter { $0.hasSuffix(".hsrec") }
            try await Task.sleep(for: .milliseconds(50))
        }
        let recording = recordings + "/" + (try #require(names.first))
        // It holds the tunnel's full IDs (and, with the key log, its plaintext): owner only, no temporary left.
        #expect(try FileManager.default.attributesOfItem(atPath: recording)[.posixPermissions] as? Int == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: recordings).allSatisfy { $0.hasSuffix(".hsrec") })

        let svg = lab.file("session.svg")
        let inspect = try lab.start("inspect", ["inspect", recording, "--keylog", desktopKeys, "--qr", desktop.url, "--svg", svg])
        #expect(try await inspect.waitForExit() == 0, "\(inspect.transcript)")
        let text = inspect.standardOutput.text
        for expected in ["Noise KNpsk0 message 1 (81 B)", "post-handshake message", "update message (528 B)",
                         "CTAP request: authenticatorMakeCredential", "CTAP response: CTAP2_OK (0x00)", "shutdown (48 B)",
                         "(matches the recording)", "no anomalies"] {
            #expect(text.contains(expected), "missing \(expected) in:\n\(text)")
        }
        #expect(try String(contentsOfFile: svg, encoding: .utf8).hasPrefix("<svg"))
        // It shows the decrypted messages: owner only, like the key log.
        #expect(try FileManager.default.attributesOfItem(atPath: svg)[.posixPermissions] as? Int == 0o600)

        // The SVG to standard output (`--svg /dev/stdout > flow.svg`, `--svg -`): stdout is the SVG
        // alone, the terminal diagram is not printed into it. With --json, both cannot be there: 64.
        for path in ["/dev/stdout", "-"] {
            let toStdout = try lab.start("inspect-svg-stdout", ["inspect", recording, "--keylog", desktopKeys, "--svg", path])
            #expect(try await toStdout.waitForExit() == 0, "\(toStdout.transcript)")
            let out = toStdout.standardOutput.text
            #expect(out.hasPrefix("<svg") && out.hasSuffix("</svg>\n") && !out.contains("no anomalies\n"), "\(path): \(out.suffix(300))")
        }
        let both = try lab.start("inspect-svg-json", ["inspect", recording, "--svg", "-", "--json"])
        #expect(try await both.waitForExit() == 64, "\(both.transcript)")
        #expect(both.standardError.text.contains("is standard output, where --json prints"), "\(both.transcript)")

        let json = try lab.start("inspect-json", ["inspect", recording, "--keylog", desktopKeys, "--json"])
        #expect(try await json.waitForExit() == 0, "\(json.transcript)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.text.utf8)) as? [String: Any])
        #expect(object["keys"] as? String == "matched")
        #expect((object["messages"] as? [Any])?.count == 7)

        // Another session's keys: exit 1, and it says so.
        let wrongKeys = lab.file("wrong-keys.log")
        let forged = "HYBRID_SESSION_KEYS 04" + String(repeating: "11", count: 64) + " "
            + Array(repeating: String(repeating: "22", count: 32), count: 3).joined(separator: " ") + "\n"
        try forged.write(toFile: wrongKeys, atomically: true, encoding: .utf8)
        let wrong = try lab.start("inspect-wrong", ["inspect", recording, "--keylog", wrongKeys])
        #expect(try await wrong.waitForExit() == 1, "\(wrong.transcript)")
        // One `error:` line, as every failure ends.
        #expect(
            wrong.standardError.text.split(separator: "\n").last.map {
                $0.hasPrefix("error: ") && $0.contains("the keys don't match")
            } == true, "\(wrong.transcript)")
        #expect(!wrong.standardOutput.text.contains("CTAP request"))

        // The recording itself given as the key log: not a key log, exit 2 saying so (it was
        // "0 entries … the keys don't match", exit 1).
        let notKeys = try lab.start("inspect-not-keys", ["inspect", recording, "--keylog", recording])
        #expect(try await notKeys.waitForExit() == 2, "\(notKeys.transcript)")
        #expect(notKeys.standardError.text.contains("holds no HYBRID_SESSION_KEYS line: not a key log written by --keylog"), "\(notKeys.transcript)")
        // Comments alone are a key log with no entry yet, not another file: exit 1, the keys don't match.
        let comments = lab.file("comments.log")
        try "# keys of the lab\n\n".write(toFile: comments, atomically: true, encoding: .utf8)
        let commented = try lab.start("inspect-comments", ["inspect", recording, "--keylog", comments])
        #expect(try await commented.waitForExit() == 1, "\(commented.transcript)")
        // A key log an editor saved with a byte-order mark: its first line is still read.
        let marked = lab.file("bom-keys.log")
        try ("\u{FEFF}" + String(contentsOfFile: desktopKeys, encoding: .utf8)).write(toFile: marked, atomically: true, encoding: .utf8)
        let bom = try lab.start("inspect-bom", ["inspect", recording, "--keylog", marked])
        #expect(try await bom.waitForExit() == 0, "\(bom.transcript)")

        // A truncated copy: exit 2 with the reader's specific reason.
        let bytes = try Data(contentsOf: URL(fileURLWithPath: recording))
        let truncated = lab.file("truncated.hsrec")
        try bytes.prefix(bytes.count - 20).write(to: URL(fileURLWithPath: truncated))
        let cut = try lab.start("inspect-cut", ["inspect", truncated])
        #expect(try await cut.waitForExit() == 2, "\(cut.transcript)")
        #expect(cut.standardError.text.contains("recording truncated"), "\(cut.transcript)")
        // With --json the failure is also an `error` event on stdout, with desktop's members.
        let cutJSON = try lab.start("inspect-cut-json", ["inspect", truncated, "--json"])
        #expect(try await cutJSON.waitForExit() == 2, "\(cutJSON.transcript)")
        let event = try #require(
            try JSONSerialization.jsonObject(with: Data(cutJSON.standardOutput.text.utf8)) as? [String: Any], "\(cutJSON.transcript)")
        #expect(event["event"] as? String == "error" && event["kind"] as? String == "badInput" && event["exitCode"] as? Int == 2)
        #expect((event["message"] as? String)?.contains("recording truncated") == true, "\(event)")
    }
}
