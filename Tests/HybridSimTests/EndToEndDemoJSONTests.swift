import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `hybrid-sim demo --json`: standard output is one JSON event per line (a script reads the QR URL,
/// each ceremony's credential and the ending), the narration stays on standard error.
@Suite("End to end: demo --json")
struct EndToEndDemoJSONTests {
    @Test("a demo that succeeds: qr, a credential for the registration and each linked sign-in, then result; no QR art on stdout")
    func succeeds() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let demo = try lab.start("demo", ["demo", "--json", "--home", lab.file("demo"), "--timeout", "30"])
        #expect(try await demo.waitForExit(timeout: .seconds(90)) == 0, "\(demo.transcript)")
        let events = try JSONEvents.all(demo)
        #expect(events.map { $0["event"] as? String } == ["qr", "credential", "credential", "credential", "result"], "\(events)")
        #expect((events.first?["url"] as? String)?.hasPrefix("FIDO:/") == true)
        #expect(events.compactMap { $0["step"] as? String } == ["registration", "registration", "linked sign-in 1", "linked sign-in 2"])
        for event in events where event["event"] as? String == "credential" {
            let credential = try #require(event["credential"] as? [String: Any], "\(event)")
            #expect(credential["type"] as? String == "public-key" && credential["response"] is [String: Any], "\(credential)")
        }
        #expect(events.last?["ceremonies"] as? Int == 3)
        #expect(demo.standardError.text.contains("demo    │ done: a passkey was registered"), "the narration stays on stderr")
    }

    @Test("a demo that fails (the phone's passkey store is damaged): its error as the last event, with kind, exit code and the error line's message")
    func fails() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let home = lab.file("demo")
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        try "{garbage\n".write(toFile: home + "/passkeys.json", atomically: true, encoding: .utf8)
        let demo = try lab.start("demo", ["demo", "--json", "--home", home, "--timeout", "30"])
        #expect(try await demo.waitForExit(timeout: .seconds(40)) == 2, "\(demo.transcript)")
        let events = try JSONEvents.all(demo)
        let last = try #require(events.last, "\(demo.transcript)")
        #expect(last["event"] as? String == "error" && last["kind"] as? String == "badInput" && last["exitCode"] as? Int == 2, "\(last)")
        #expect(last["message"] as? String == "registration failed: the phone exited 2 (its error is above), so the demo stopped the desktop", "\(last)")
        #expect((last["childError"] as? String)?.hasPrefix("cannot use the passkey store") == true, "the phone's own error: \(last)")
        #expect(!events.contains { $0["event"] as? String == "credential" }, "\(events)")
    }

    @Test("a demo --json ended by SIGINT while its desktop waits: the events so far, then error with kind interrupted, exit 130")
    func interrupted() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let demo = try lab.start("demo", ["demo", "--json", "--home", lab.file("demo"), "--timeout", "30"])
        _ = try await demo.waitForOutput("the desktop waiting", in: \.standardError) { lines in
            lines.contains { $0.contains("desktop │ waiting for a nearby phone") }
        }
        demo.signal(SIGINT)
        #expect(try await demo.waitForExit(timeout: .seconds(10)) == 130, "\(demo.transcript)")
        let events = try JSONEvents.all(demo)
        let last = try #require(events.last, "\(demo.transcript)")
        #expect(last["event"] as? String == "error" && last["kind"] as? String == "interrupted" && last["exitCode"] as? Int == 130, "\(events)")
        #expect(events.first?["event"] as? String == "qr", "\(events)")
    }

    @Test("a demo whose desktop fails before its QR code (a damaged relying-party store): the desktop's own status and error, not a guess (exit 2, not 1)")
    func desktopFailsEarly() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let home = lab.file("demo")
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        try "[\n".write(toFile: home + "/rp-credentials.json", atomically: true, encoding: .utf8)
        let demo = try lab.start("demo", ["demo", "--json", "--home", home, "--timeout", "30"])
        #expect(try await demo.waitForExit(timeout: .seconds(40)) == 2, "\(demo.transcript)")
        let last = try #require(try JSONEvents.all(demo).last, "\(demo.transcript)")
        #expect(last["kind"] as? String == "badInput" && last["exitCode"] as? Int == 2, "\(last)")
        #expect(last["message"] as? String == "registration failed: the desktop exited 2 (its error is above) before it printed its QR code", "\(last)")
        #expect((last["childError"] as? String)?.hasPrefix("cannot use the relying-party store") == true, "\(last)")
    }
}
