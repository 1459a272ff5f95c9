import Foundation
import HybridSimTestSupport
import Testing

/// `hybrid-sim desktop` against a second, independent phone: `Fixtures/independent_phone.py`,
/// written in Python from HybridSim's docs and vectors alone (its own CBOR, Noise, Crypter and
/// WebSocket client; `cryptography` for the primitives), never from its sources. That both agree
/// byte for byte, and that the desktop reads what another phone does differently within the
/// protocol's tolerance and names what it does wrong, is checked here; its self test checks the
/// published Vectors/ with a second implementation. Skipped without python3 and `cryptography`
/// (Scripts/install-deps installs them; CI runs these tests).
@Suite("End to end: an independent phone written from the docs (processes)", .serialized, .timeLimit(.minutes(5)))
struct EndToEndIndependentPhoneTests {
    static let script = OptionsFixtures.directory.appendingPathComponent("independent_phone.py").path
    static let vectors = OptionsFixtures.directory
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Vectors").path

    static let available: Bool = {
        (try? ChildProcess.run("/usr/bin/env", ["python3", "-c", "import cryptography"]).status) == 0
    }()

    /// One ceremony: the desktop with `arguments`, the independent phone with `deviations`;
    /// returns both exit statuses and the desktop's stderr.
    private static func ceremony(
        _ lab: EndToEndLab, _ arguments: [String], deviations: [String] = []
    ) async throws -> (desktop: Int32, phone: Int32, desktopError: String) {
        let desktop = try await lab.startDesktop(["--rp-id", "example.com", "--timeout", "10"] + arguments, json: true)
        var phoneArguments = [
            "python3", script, "run", "--qr", desktop.url, "--relay", desktop.relayURL, "--proximity", desktop.proximityURL,
            "--store", lab.file("independent-phone.json"), "--timeout", "10",
        ]
        if !deviations.isEmpty { phoneArguments += ["--deviate", deviations.joined(separator: ",")] }
        let phone = try lab.startOther("independent phone", phoneArguments)
        let desktopStatus = try await desktop.process.waitForExit()
        let phoneStatus = try await phone.waitForExit()
        return (desktopStatus, phoneStatus, desktop.process.standardError.lines.joined(separator: "\n") + "\n" + phone.transcript)
    }

    static let missing = Comment(rawValue: "python3 with cryptography is not installed here (Scripts/install-deps installs it; CI runs these tests)")

    @Test(
        "its self test passes against Vectors/: a second implementation reads every published value the same way",
        .enabled(if: available, missing))
    func selfTest() async throws {
        try await Self.expectSelfTestPasses(Self.script)
    }

    /// Runs a fixture's `selftest` against Vectors/ and expects every check to pass.
    static func expectSelfTestPasses(_ script: String) async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let test = try lab.startOther("self test", ["python3", script, "selftest", "--vectors", vectors])
        #expect(try await test.waitForExit() == 0, "\(test.transcript)")
        #expect(test.standardOutput.lines.last?.hasSuffix(" passed, 0 failed") == true, "\(test.transcript)")
    }

    @Test(
        "registration, sign-in, what other phones do differently, and what is wrong: the desktop agrees, tolerates and names each",
        .enabled(if: available, missing))
    func ceremonies() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }

        let registered = try await Self.ceremony(lab, ["--request", "mc", "--user", "alice"])
        #expect(registered.desktop == 0 && registered.phone == 0, "\(registered.desktopError)")
        #expect(registered.desktopError.contains("verified: registered credential"), "\(registered.desktopError)")
        let signedIn = try await Self.ceremony(lab, ["--request", "ga", "--user", "alice"])
        #expect(signedIn.desktop == 0 && signedIn.phone == 0, "\(signedIn.desktopError)")
        #expect(signedIn.desktopError.contains("verified: alice signed in"), "\(signedIn.desktopError)")

        // Within the protocol's tolerance (Docs/PROTOCOL-TOLERANCE.md): verified all the same.
        // (One credential is allowed, so the phone may leave it out of its assertion.)
        for deviations in [
            ["close-after-response"], ["getinfo-extra", "no-update", "no-features"], ["odd-padding"], ["response-extra"],
            ["omit-credential"],
        ] {
            let run = try await Self.ceremony(lab, ["--request", "ga", "--user", "alice"], deviations: deviations)
            #expect(run.desktop == 0, "\(deviations): \(run.desktopError)")
        }

        // Wrong: the documented exit status and the specific reason. (The repeated counter first:
        // a rejected assertion leaves the phone's counter one ahead of the relying party's.)
        for (deviation, status, words) in [
            ("same-signcount", 5, "sign count did not increase"),
            ("bad-signature", 5, "invalid signature"),
            ("garbage-cbor", 7, "the phone's getAssertion response is malformed"),
            ("wrong-handshake-key", 7, "handshake message does not authenticate"),
            ("omit-credential", 7, "a phone may leave it out only when the request allows exactly one credential"),
        ] as [(String, Int32, String)] {
            // A discoverable sign-in for the omitted credential: none allowed.
            let user = deviation.hasPrefix("omit-credential") ? [] : ["--user", "alice"]
            let run = try await Self.ceremony(lab, ["--request", "ga"] + user, deviations: deviation.split(separator: ",").map(String.init))
            #expect(run.desktop == status, "\(deviation): \(run.desktopError)")
            #expect(run.desktopError.contains(words), "\(deviation): \(run.desktopError)")
        }
    }
}
