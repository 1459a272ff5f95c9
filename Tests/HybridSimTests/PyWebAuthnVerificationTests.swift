import CTAP2
import Foundation
import HybridCore
import HybridSim
import Testing

/// Options documents of every shape relying parties send, run through `hybrid-sim desktop
/// --options` and a phone (processes), and the resulting credentials verified by py_webauthn, an
/// independent relying-party library.
@Suite("py_webauthn verifies credentials made from each options shape (processes)", .serialized)
struct PyWebAuthnVerificationTests {
    /// The inner options object of a fixture, whatever its wrapper.
    private static func innerOptions(_ name: String) throws -> [String: Any] {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(OptionsFixtures.bytes(name))) as? [String: Any])
        return (object["publicKey"] ?? object["options"]) as? [String: Any] ?? object
    }

    /// Registers with a fixture and has py_webauthn verify the printed credential.
    private func registerAndVerify(
        _ lab: EndToEndLab, fixture: String, extra: [String] = []
    ) async throws -> (credential: [String: Any], verified: [String: Any], desktop: EndToEndLab.Desktop) {
        let path = OptionsFixtures.directory.appendingPathComponent(fixture).path
        let desktop = try await lab.startDesktop(["--request", "mc", "--options", path] + extra)
        let phone = try lab.startPhone(for: desktop, ["--scan", try lab.capture(desktop)])
        #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)\n\(phone.transcript)")
        #expect(try await phone.waitForExit() == 0)
        let credential = try #require(
            try JSONSerialization.jsonObject(with: Data(EndToEndLab.credentialJSON(desktop))) as? [String: Any])
        // The challenge as base64url (ForgeRock's is standard base64 inside its callbacks).
        let challenge = Base64URL.encode(
            try PublicKeyCredentialCreationOptionsJSON.parse(
                document: OptionsFixtures.bytes(fixture), userIdEncoding: extra.contains("utf8") ? .utf8 : .base64url
            ).options.challenge.bytes)
        let verified = try PyWebAuthn.verify([
            "kind": "registration", "credential": credential, "challenge": challenge,
            "origin": desktop.origin, "rpId": desktop.rpId,
        ])
        #expect(verified["verified"] as? Bool == true)
        #expect(verified["credentialId"] as? String == credential["id"] as? String)
        return (credential, verified, desktop)
    }

    @Test(
        "registration options of each shape (bare py_webauthn, bare SimpleWebAuthn, {publicKey}, {options} with a UTF-8 user.id, ForgeRock callbacks)",
        .enabled(if: PyWebAuthn.available, Comment(rawValue: PyWebAuthn.missing)),
        arguments: [
            ("py_webauthn-registration-options.json", "bare options", [String]()),
            ("simplewebauthn-registration-options.json", "bare options", []),
            ("hanko-registration-options.json", "a {\"publicKey\": …} wrapper", []),
            ("okta-registration-options.json", "an {\"options\": …} wrapper", ["--user-id-encoding", "utf8"]),
            ("forgerock-registration-callbacks.json", "ForgeRock WebAuthn callback metadata", []),
        ])
    func registrationShapes(fixture: String, shape: String, extra: [String]) async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (credential, _, desktop) = try await registerAndVerify(lab, fixture: fixture, extra: extra)
        #expect(desktop.process.standardError.text.contains("options: recognised \(shape)"), "\(desktop.process.transcript)")
        if fixture.hasPrefix("okta") {
            // The user handle the phone stored is the UTF-8 of Okta's plain-string user.id.
            let passkeys = try PasskeyStore.load(path: lab.passkeyStore).passkeys
            #expect(passkeys.map(\.userID) == [Array("00u1x2y3z4AbCdEfG5h7".utf8)])
        }
        #expect(credential["type"] as? String == "public-key")
        if fixture.hasPrefix("forgerock") {
            // The value for ForgeRock's webAuthnOutcome callback: the fixture's node supports a JSON
            // response, so {"authenticatorAttachment", "legacyData": clientDataJSON::signed bytes::id}.
            let line = try #require(
                desktop.process.standardError.lines.first { $0.hasPrefix("ForgeRock webAuthnOutcome") })
            let outcome = String(try #require(line.split(separator: ": ", maxSplits: 1).last))
            let wrapped = try #require(try JSONSerialization.jsonObject(with: Data(outcome.utf8)) as? [String: String], "\(outcome)")
            #expect(wrapped["authenticatorAttachment"] == "cross-platform")
            let parts = try #require(wrapped["legacyData"], "\(outcome)").components(separatedBy: "::")
            #expect(parts.count == 3)
            let response = try #require(credential["response"] as? [String: Any])
            let clientDataText = try #require(response["clientDataJSON"] as? String)
            let clientData = try #require(Base64URL.decode(clientDataText))
            #expect(parts.first == String(decoding: clientData, as: UTF8.self))
            let attestationText = try #require(response["attestationObject"] as? String)
            let attestation = try #require(Base64URL.decode(attestationText))
            #expect(parts[1] == attestation.map { String(Int8(bitPattern: $0)) }.joined(separator: ","))
            #expect(parts.last == credential["id"] as? String)
        }
    }

    @Test(
        "a {publicKey}-wrapped sign-in after a registration: py_webauthn verifies the assertion with the registered key",
        .enabled(if: PyWebAuthn.available, Comment(rawValue: PyWebAuthn.missing)))
    func wrappedSignIn() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (_, registered, _) = try await registerAndVerify(lab, fixture: "hanko-registration-options.json")
        let fixture = "hanko-authentication-options.json"
        let desktop = try await lab.startDesktop(
            ["--request", "ga", "--options", OptionsFixtures.directory.appendingPathComponent(fixture).path])
        let phone = try lab.startPhone(for: desktop, ["--scan", try lab.capture(desktop, name: "signin.txt")])
        #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)\n\(phone.transcript)")
        #expect(try await phone.waitForExit() == 0)
        let assertion = try #require(
            try JSONSerialization.jsonObject(with: Data(EndToEndLab.credentialJSON(desktop))) as? [String: Any])
        let request: [String: Any] = [
            "kind": "authentication", "credential": assertion,
            "challenge": try #require(try Self.innerOptions(fixture)["challenge"] as? String),
            "origin": desktop.origin, "rpId": desktop.rpId, "publicKey": try #require(registered["publicKey"] as? String),
            "signCount": 0, "requireUserVerification": true,
        ]
        let verified = try PyWebAuthn.verify(request)
        #expect(verified["signCount"] as? Int == 1)

        // Tampered: py_webauthn must reject a flipped signature byte.
        var tampered = assertion
        var response = try #require(assertion["response"] as? [String: Any])
        let signatureText = try #require(response["signature"] as? String)
        var signature = try #require(Base64URL.decode(signatureText))
        signature[signature.count - 1] ^= 0x01
        response["signature"] = Base64URL.encode(signature)
        tampered["response"] = response
        var bad = request
        bad["credential"] = tampered
        #expect {
            try PyWebAuthn.verify(bad)
        } throws: { error in
            "\(error)".contains("InvalidAuthenticationResponse")
        }
    }
}
