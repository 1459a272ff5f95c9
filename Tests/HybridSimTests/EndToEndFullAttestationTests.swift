import CTAP2
import Foundation
import HybridCore
import HybridSimTestSupport
import HybridTestSupport
import Testing

/// `phone --attestation packed-x5c` against `desktop --attestation-roots` (processes): the root the
/// phone writes anchors the desktop's check, another root is refused, and py_webauthn accepts what
/// the desktop printed with the same root.
@Suite("End to end: packed full attestation (x5c) (processes)", .serialized)
struct EndToEndFullAttestationTests {
    @Test("the phone's root (written before any desktop) anchors the desktop; --json says basic and trusted; py_webauthn agrees")
    func anchored() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let root = lab.file("root.pem")
        let writer = try lab.start("phone", ["phone", "--attestation-root-out", root])
        #expect(try await writer.waitForExit() == 0, "\(writer.transcript)")
        #expect(writer.standardError.text.contains("wrote the simulated attestation root CA to \(root)"))
        let pem = try String(contentsOfFile: root, encoding: .utf8)
        #expect(pem.hasPrefix("-----BEGIN CERTIFICATE-----"))

        let desktop = try await lab.startDesktop(["--request", "mc", "--attestation-roots", root], json: true)
        let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url, "--attestation", "packed-x5c"])
        #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)\n\(phone.transcript)")
        #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")
        #expect(phone.standardError.text.contains("(packed-x5c attestation)"), "\(phone.transcript)")
        let verifiedLine = try #require(desktop.process.standardError.lines.first { $0.hasPrefix("verified: registered") })
        #expect(
            verifiedLine.contains("(packed attestation: basic, x5c of 1 certificate, chained to trusted root "),
            "\(verifiedLine)")
        let result = try #require(try JSONEvents.all(desktop.process).last)
        #expect(result["event"] as? String == "result")
        #expect(result["attestation"] as? String == "basic")
        #expect(result["attestationTrusted"] as? Bool == true)

        // The credential as printed: the independent shape check and py_webauthn with the same root.
        let credential = try #require(result["credential"] as? [String: Any])
        let text = try JSONSerialization.data(withJSONObject: credential)
        let registration = try WebAuthnResponseVerifier.verifyRegistration(
            json: Array(text), expecting: EndToEndLab.expectation(desktop))
        #expect(registration.attestationFormat == "packed")
        if PyWebAuthn.available {
            let verified = try PyWebAuthn.verify([
                "kind": "registration", "credential": credential, "challenge": Base64URL.encode(desktop.challenge),
                "origin": desktop.origin, "rpId": desktop.rpId, "rootCertificates": ["packed": [pem]],
            ])
            #expect(verified["verified"] as? Bool == true)
        }
    }

    @Test("without roots: accepted, not chained to a trusted root; with another root: exit 5, untrusted attestation")
    func unanchoredAndUntrusted() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let desktop = try await lab.startDesktop(["--request", "mc"])
        let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url, "--attestation", "packed-x5c"])
        #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)\n\(phone.transcript)")
        #expect(try await phone.waitForExit() == 0)
        #expect(
            desktop.process.standardError.text.contains(
                "(packed attestation: basic, x5c of 1 certificate, not chained to a trusted root)"),
            "\(desktop.process.transcript)")

        let other = lab.file("other-root.pem")
        try Data(TestAttestationPKI().rootPEM.utf8).write(to: URL(fileURLWithPath: other))
        let strict = try await lab.startDesktop(["--request", "mc", "--user", "bob", "--attestation-roots", other])
        let refused = try lab.startPhone(for: strict, ["--qr", strict.url, "--attestation", "packed-x5c"])
        #expect(try await strict.process.waitForExit() == 5, "\(strict.process.transcript)\n\(refused.transcript)")
        _ = try await refused.waitForExit()
        let error = FailureOutput.singleErrorLine(strict.process)
        #expect(error.contains("untrusted attestation: packed: packed x5c[0]"), "\(error)")
        #expect(error.contains("is not signed by any of the 1 trusted root(s)"), "\(error)")

        // A roots file that holds no certificate is bad input (exit 2), before any socket.
        let bad = lab.file("bad.pem")
        try Data("not a certificate\n".utf8).write(to: URL(fileURLWithPath: bad))
        let unusable = try lab.start("desktop", ["desktop", "--request", "mc", "--attestation-roots", bad])
        #expect(try await unusable.waitForExit() == 2, "\(unusable.transcript)")
        #expect(unusable.standardError.text.contains("--attestation-roots \(bad) holds no usable root"), "\(unusable.transcript)")
    }

    @Test("--attestation-root-out alone: a full disk (/dev/full) is exit 1, a missing directory 2, a flag of a transaction with it 64 naming it; with a code in HYBRID_SIM_QR the flow runs after it")
    func rootOutFailures() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        // The machine failing (ENOSPC) is exit 1, as for the stores; it was exit 2, as bad input.
        let full = try lab.start("phone", ["phone", "--attestation-root-out", "/dev/full"])
        #expect(try await full.waitForExit() == 1, "\(full.transcript)")
        #expect(FailureOutput.singleErrorLine(full) == "error: cannot write --attestation-root-out /dev/full: no space left on device")
        let nowhere = lab.file("no-such-directory/root.pem")
        let missing = try lab.start("phone", ["phone", "--attestation-root-out", nowhere])
        #expect(try await missing.waitForExit() == 2, "\(missing.transcript)")
        // Flags of a transaction were ignored without a word (the root written, exit 0).
        let root = lab.file("root.pem")
        let extra = try lab.start("phone", ["phone", "--attestation-root-out", root, "--relay", "ws://127.0.0.1:47001", "--deny"])
        #expect(try await extra.waitForExit() == 64, "\(extra.transcript)")
        #expect(
            extra.standardError.text.contains(
                "--attestation-root-out alone only writes the root; --relay, --deny belong to a transaction (--qr, --scan, HYBRID_SIM_QR, --listen or --unlink): drop them, or give the transaction"),
            "\(extra.transcript)")
        #expect(!FileManager.default.fileExists(atPath: root))
        // A code in HYBRID_SIM_QR (the desktop's `phone command:` line) is the QR flow: the root is
        // written first and the flow runs (here it fails on the code), the flags are its own.
        let environment = try lab.start(
            "phone", ["phone", "--attestation-root-out", root, "--attestation", "packed-x5c", "--timeout", "1"],
            environment: ["HYBRID_SIM_QR": "FIDO:/123"])
        #expect(try await environment.waitForExit() == 2, "\(environment.transcript)")
        #expect(FileManager.default.fileExists(atPath: root), "the root was not written before the flow")
        #expect(!environment.standardError.text.contains("alone only writes the root"), "\(environment.transcript)")
    }
}
