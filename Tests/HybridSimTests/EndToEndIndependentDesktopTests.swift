import CTAP2
import Foundation
import HybridCore
import Testing

/// `hybrid-sim phone` against a second, independent desktop: `Fixtures/independent_desktop.py`,
/// written in Python from HybridSim's docs and vectors alone (its own QR code, proximity scanner,
/// advert decryption, Noise KNpsk0 initiator, requests and relying-party checks), never from its
/// sources; the mirror of `EndToEndIndependentPhoneTests`. Both ends agree byte for byte through
/// `hybrid-sim relay`, the phone reads what other desktops do differently within the protocol's
/// tolerance, and names what they do wrong with the documented exit status. Skipped without
/// python3 and `cryptography` (Scripts/install-deps installs them; CI runs these tests).
@Suite("End to end: an independent desktop written from the docs (processes)", .serialized, .timeLimit(.minutes(5)))
struct EndToEndIndependentDesktopTests {
    static let script = OptionsFixtures.directory.appendingPathComponent("independent_desktop.py").path

    /// One ceremony: the independent desktop with `request` and `deviations` through `relayURL`,
    /// and `hybrid-sim phone` answering its QR code; both exit statuses and both transcripts.
    private static func ceremony(
        _ lab: EndToEndLab, relayURL: String, _ request: String, deviations: [String] = [], phone extra: [String] = []
    ) async throws -> (desktop: Int32, phone: Int32, transcript: String) {
        let proximityPort = try EndToEndLab.closedPort(udp: true)
        var arguments = [
            "python3", script, "run", "--relay", relayURL, "--proximity-port", String(proximityPort), "--store",
            lab.file("independent-desktop-rp.json"), "--request", request, "--timeout", "10",
        ]
        if !deviations.isEmpty { arguments += ["--deviate", deviations.joined(separator: ",")] }
        let desktop = try lab.startOther("independent desktop", arguments)
        let lines = try await desktop.waitForOutput("FIDO:/ line") { $0.contains { $0.hasPrefix("FIDO:/") } }
        let url = try #require(lines.first { $0.hasPrefix("FIDO:/") })
        let phone = try lab.start(
            "phone",
            ["phone", "--qr", url, "--relay", relayURL, "--proximity", "udp://127.0.0.1:\(proximityPort)", "--timeout", "10"] + extra)
        let phoneStatus = try await phone.waitForExit()
        let desktopStatus = try await desktop.waitForExit()
        return (desktopStatus, phoneStatus, phone.transcript + "\n" + desktop.transcript)
    }

    @Test(
        "its self test passes against Vectors/: the desktop's side of the published values, read by a second implementation",
        .enabled(if: EndToEndIndependentPhoneTests.available, EndToEndIndependentPhoneTests.missing))
    func selfTest() async throws {
        try await EndToEndIndependentPhoneTests.expectSelfTestPasses(Self.script)
    }

    @Test(
        "registration, sign-in, what other desktops do differently, and what is wrong: the phone agrees, tolerates and names each",
        .enabled(if: EndToEndIndependentPhoneTests.available, EndToEndIndependentPhoneTests.missing))
    func ceremonies() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (_, relayURL) = try await lab.startRelay()

        let registered = try await Self.ceremony(lab, relayURL: relayURL, "mc")
        #expect(registered.desktop == 0 && registered.phone == 0, "\(registered.transcript)")
        let signedIn = try await Self.ceremony(lab, relayURL: relayURL, "ga")
        #expect(signedIn.desktop == 0 && signedIn.phone == 0, "\(signedIn.transcript)")

        // Within the protocol's tolerance (Docs/PROTOCOL-TOLERANCE.md): answered all the same.
        for deviations in [
            ["close-no-shutdown"], ["getinfo-first"], ["selection-first"], ["update-message"], ["qr-unknown-keys"],
            ["lowercase-ids"], ["odd-padding"],
        ] {
            let run = try await Self.ceremony(lab, relayURL: relayURL, "ga", deviations: deviations)
            #expect(run.desktop == 0 && run.phone == 0, "\(deviations): \(run.transcript)")
        }

        // Wrong: the phone's documented exit status and its reason.
        for (deviation, status, words) in [
            ("bad-request-tag", 7, "does not authenticate"),
            ("shutdown-first", 7, "the desktop ended the transaction without a request"),
            ("shutdown-with-request", 7, "the desktop ended the transaction while the request was being answered"),
            ("unsupported-command-only", 4, "is not supported over hybrid"),
            ("getinfo-only", 1, "it asked only for authenticatorGetInfo; nothing was saved"),
            ("unsupported-command", 0, "signed the assertion"),
        ] as [(String, Int32, String)] {
            let run = try await Self.ceremony(lab, relayURL: relayURL, "ga", deviations: [deviation])
            #expect(run.phone == status, "\(deviation): \(run.transcript)")
            #expect(run.transcript.contains(words), "\(deviation): \(run.transcript)")
        }
    }

    @Test(
        "phone --attestation packed-x5c names its certificate's AAGUID in getInfo (post-handshake and getInfo command), not zeros",
        .enabled(if: EndToEndIndependentPhoneTests.available, EndToEndIndependentPhoneTests.missing))
    func getInfoAAGUID() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (_, relayURL) = try await lab.startRelay()
        let simulated = Hex.encode(SimulatedAttestationCA.aaguid)
        let zero = String(repeating: "0", count: 32)
        for (attestation, aaguid) in [("packed-x5c", simulated), ("none", zero), ("packed", zero)] {
            let run = try await Self.ceremony(
                lab, relayURL: relayURL, "mc", deviations: ["getinfo-only"], phone: ["--attestation", attestation])
            #expect(run.desktop == 0, "\(attestation): \(run.transcript)")
            #expect(run.transcript.contains("versions ['FIDO_2_0', 'FIDO_2_1'], aaguid \(aaguid)"), "\(attestation): \(run.transcript)")
            #expect(run.transcript.contains("getInfo answered CTAP2_OK (0x00), aaguid \(aaguid)"), "\(attestation): \(run.transcript)")
        }
    }
}
