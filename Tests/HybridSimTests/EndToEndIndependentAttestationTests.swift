import Foundation
import HybridSimTestSupport
import Testing

/// `hybrid-sim desktop --attestation-roots` against packed full attestation (`x5c`) made by an
/// independent producer: `Fixtures/independent_phone.py --attestation x5c`, whose CA (its own P-384
/// root, made by `make-ca`) and attestation certificates are pyca `cryptography`'s X.509 builder's,
/// written from WebAuthn §8.2 and §8.2.1, never from HybridSim's `SimulatedAttestationCA`. The
/// verifier is thus checked against certificates it did not make, and each wrong one is named.
@Suite("End to end: packed full attestation from an independent phone (processes)", .serialized, .timeLimit(.minutes(5)))
struct EndToEndIndependentAttestationTests {
    static let script = EndToEndIndependentPhoneTests.script
    /// The independent phone's AAGUID in x5c mode (`X5C_AAGUID` in the script).
    static let aaguid = "6c1f5e2a93d84b07a2c4f0e1d3b59a78"

    /// Makes one of the independent vendor's root CAs; returns the certificate and key paths.
    private static func makeCA(_ lab: EndToEndLab, _ name: String) async throws -> (cert: String, key: String) {
        let (cert, key) = (lab.file("\(name).pem"), lab.file("\(name).key"))
        let maker = try lab.startOther("make-ca", ["python3", script, "make-ca", "--cert", cert, "--key", key])
        #expect(try await maker.waitForExit() == 0, "\(maker.transcript)")
        return (cert, key)
    }

    /// One registration: the desktop (`--json`) with `arguments`, the independent phone attesting
    /// with `ca` and `deviations`; returns the desktop's status, its last event, and both transcripts.
    private static func register(
        _ lab: EndToEndLab, _ arguments: [String], ca: (cert: String, key: String), deviations: [String] = [],
        user: String
    ) async throws -> (status: Int32, last: [String: Any]?, text: String) {
        let desktop = try await lab.startDesktop(
            ["--rp-id", "example.com", "--timeout", "10", "--request", "mc", "--user", user] + arguments, json: true)
        var phoneArguments = [
            "python3", script, "run", "--qr", desktop.url, "--relay", desktop.relayURL, "--proximity", desktop.proximityURL,
            "--store", lab.file("independent-phone.json"), "--timeout", "10",
            "--attestation", "x5c", "--ca-cert", ca.cert, "--ca-key", ca.key,
        ]
        if !deviations.isEmpty { phoneArguments += ["--deviate", deviations.joined(separator: ",")] }
        let phone = try lab.startOther("independent phone", phoneArguments)
        let status = try await desktop.process.waitForExit()
        _ = try await phone.waitForExit()
        return (status, try? JSONEvents.all(desktop.process).last, desktop.process.transcript + "\n" + phone.transcript)
    }

    @Test(
        "its chain anchors with its root (one certificate, or two with an intermediate); without roots it is accepted untrusted; another root is refused",
        .enabled(if: EndToEndIndependentPhoneTests.available, EndToEndIndependentPhoneTests.missing))
    func trust() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let vendor = try await Self.makeCA(lab, "vendor-root")
        let stranger = try await Self.makeCA(lab, "stranger-root")

        let anchored = try await Self.register(lab, ["--attestation-roots", vendor.cert], ca: vendor, user: "alice")
        #expect(anchored.status == 0, "\(anchored.text)")
        #expect(anchored.last?["attestation"] as? String == "basic", "\(anchored.text)")
        #expect(anchored.last?["attestationTrusted"] as? Bool == true, "\(anchored.text)")
        #expect(
            anchored.text.contains(
                "(packed attestation: basic, x5c of 1 certificate, chained to trusted root CN=Independent Phone Attestation Root"),
            "\(anchored.text)")

        let intermediate = try await Self.register(
            lab, ["--attestation-roots", vendor.cert], ca: vendor, deviations: ["x5c-intermediate"], user: "bob")
        #expect(intermediate.status == 0, "\(intermediate.text)")
        #expect(intermediate.last?["attestationTrusted"] as? Bool == true, "\(intermediate.text)")
        #expect(intermediate.text.contains("x5c of 2 certificates, chained to trusted root"), "\(intermediate.text)")

        let unanchored = try await Self.register(lab, [], ca: vendor, user: "carol")
        #expect(unanchored.status == 0, "\(unanchored.text)")
        #expect(unanchored.last?["attestationTrusted"] as? Bool == false, "\(unanchored.text)")
        #expect(unanchored.text.contains("x5c of 1 certificate, not chained to a trusted root"), "\(unanchored.text)")

        // The stranger's root: same names, another key.
        let refused = try await Self.register(lab, ["--attestation-roots", stranger.cert], ca: vendor, user: "dave")
        #expect(refused.status == 5, "\(refused.text)")
        #expect(refused.last?["event"] as? String == "error", "\(refused.text)")
        let message = refused.last?["message"] as? String ?? ""
        #expect(message.contains("untrusted attestation: packed: packed x5c[0]"), "\(refused.text)")
        #expect(message.contains("is not signed by any of the 1 trusted root(s)"), "\(refused.text)")
        #expect(message.contains("a trusted root has that name but its key did not sign it"), "\(refused.text)")
    }

    @Test(
        "what an implementer gets wrong is refused with exit 5 and named: the signature (or its raw r ‖ s form), a tampered certificate, the AAGUID extension, the OU, a CA leaf",
        .enabled(if: EndToEndIndependentPhoneTests.available, EndToEndIndependentPhoneTests.missing))
    func refusals() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let vendor = try await Self.makeCA(lab, "vendor-root")
        // The extension holds the AAGUID with every bit flipped.
        let flipped = stride(from: 0, to: Self.aaguid.count, by: 2).map { index -> String in
            let start = Self.aaguid.index(Self.aaguid.startIndex, offsetBy: index)
            let byte = UInt8(Self.aaguid[start..<Self.aaguid.index(start, offsetBy: 2)], radix: 16)! ^ 0xFF
            return String(format: "%02x", byte)
        }.joined()
        for (index, (deviation, words)) in [
            ("bad-attestation-sig", "invalid attestation: packed: packed full attestation: "),
            ("x5c-raw-sig", "ES256 signature is not a DER ECDSA-Sig-Value (64 bytes: a raw r ‖ s? WebAuthn signatures are DER)"),
            ("x5c-cert-tampered", "untrusted attestation: packed: packed x5c[0]"),
            ("x5c-aaguid-mismatch", "the id-fido-gen-ce-aaguid extension holds \(flipped), authData's aaguid is \(Self.aaguid)"),
            ("x5c-wrong-ou", "Subject-OU must be \"Authenticator Attestation\", is [\"Sales\"]"),
            ("x5c-ca-leaf", "Basic Constraints must have CA false, has CA true"),
        ].enumerated() {
            let run = try await Self.register(
                lab, ["--attestation-roots", vendor.cert], ca: vendor, deviations: [deviation], user: "user\(index)")
            #expect(run.status == 5, "\(deviation): \(run.text)")
            let message = run.last?["message"] as? String ?? ""
            #expect(message.contains(words), "\(deviation): \(run.text)")
            if deviation == "bad-attestation-sig" { #expect(message.contains("with the key of x5c[0]"), "\(run.text)") }
            if deviation == "x5c-cert-tampered" {
                #expect(message.contains("is not signed by any of the 1 trusted root(s); a trusted root has that name"), "\(run.text)")
            }
        }
    }
}
