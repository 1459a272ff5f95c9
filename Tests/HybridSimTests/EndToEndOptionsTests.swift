import CTAP2
import Foundation
import HybridCore
import HybridSim
import HybridSimTestSupport
import Testing

/// `hybrid-sim desktop --options FILE`: options JSON as py_webauthn and SimpleWebAuthn emit it
/// (`Fixtures/`), registration and sign-in, allow-list and discoverable, through real processes.
@Suite("End to end: --options from real relying-party libraries (processes)", .serialized)
struct EndToEndOptionsTests {
    /// The challenge, RP ID and user verification of an options fixture.
    private struct FixtureOptions {
        let path: String
        let challenge: [UInt8]
        let rpId: String
        let userVerificationRequired: Bool

        init(_ name: String) throws {
            path = OptionsFixtures.directory.appendingPathComponent(name).path
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(OptionsFixtures.bytes(name))) as? [String: Any]
            )
            let text = try #require(object["challenge"] as? String)
            challenge = try #require(Base64URL.decode(text))
            let rp = object["rp"] as? [String: Any]
            rpId = try #require((rp?["id"] ?? object["rpId"]) as? String)
            let selection = object["authenticatorSelection"] as? [String: Any]
            userVerificationRequired =
                (selection?["userVerification"] ?? object["userVerification"]) as? String == "required"
        }

        var expectation: WebAuthnResponseVerifier.Expectation {
            WebAuthnResponseVerifier.Expectation(
                challenge: challenge,
                origin: "https://\(rpId)",
                rpId: rpId,
                requireUserVerification: userVerificationRequired
            )
        }
    }

    /// Registers with an options fixture; returns the verified registration.
    private func register(
        _ lab: EndToEndLab,
        fixture: FixtureOptions,
        extra: [String] = [],
        extensionResults: (([String: Any]) -> Void)? = nil
    ) async throws -> WebAuthnResponseVerifier.VerifiedRegistration {
        let desktop = try await lab.startDesktop(["--request", "mc", "--options", fixture.path] + extra)
        #expect(desktop.challenge == fixture.challenge, "the options' challenge is used")
        let phone = try lab.startPhone(for: desktop, ["--scan", try lab.capture(desktop)])
        #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)\n\(phone.transcript)")
        #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")
        if let extensionResults {
            let credential = try #require(
                try JSONSerialization.jsonObject(with: Data(try EndToEndLab.credentialJSON(desktop))) as? [String: Any])
            extensionResults(try #require(credential["clientExtensionResults"] as? [String: Any]))
        }
        return try WebAuthnResponseVerifier.verifyRegistration(
            json: try EndToEndLab.credentialJSON(desktop),
            expecting: fixture.expectation
        )
    }

    @Test("py_webauthn registration options, then a sign-in with an allow list naming the new credential")
    func pyWebAuthnRegistrationThenAllowList() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let fixture = try FixtureOptions("py_webauthn-registration-options.json")
        let registration = try await register(
            lab, fixture: fixture, extensionResults: { results in #expect(results.isEmpty, "no extension asked: \(results)") })
        #expect(registration.flags.contains(.userVerified), "userVerification required")
        let stored = try RelyingPartyStore.load(path: lab.relyingPartyStore).credentials
        #expect(stored.map(\.userName) == ["alice@example.com"], "the options' user is registered")

        // The relying party now asks for exactly this credential (and one the phone does not hold).
        let challenge = RandomSource.system.bytes(32)
        let options = """
            {"challenge": "\(Base64URL.encode(challenge))", "timeout": 30000, "rpId": "example.com",
             "allowCredentials": [{"id": "\(Base64URL.encode(RandomSource.system.bytes(16)))", "type": "public-key"},
                                  {"id": "\(Base64URL.encode(registration.credentialId))", "type": "public-key", "transports": ["hybrid"]}],
             "userVerification": "required"}
            """
        let path = lab.file("allow-list-options.json")
        try options.write(toFile: path, atomically: true, encoding: .utf8)
        let signIn = try await lab.startDesktop(["--request", "ga", "--options", path])
        #expect(signIn.challenge == challenge)
        let phone = try lab.startPhone(for: signIn, ["--scan", try lab.capture(signIn)])
        #expect(try await signIn.process.waitForExit() == 0, "\(signIn.process.transcript)\n\(phone.transcript)")
        #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")
        let assertion = try WebAuthnResponseVerifier.verifyAuthentication(
            json: try EndToEndLab.credentialJSON(signIn),
            publicKey: registration.publicKey,
            expecting: WebAuthnResponseVerifier.Expectation(
                challenge: challenge,
                origin: "https://example.com",
                rpId: "example.com",
                requireUserVerification: true
            ),
            credentialId: registration.credentialId
        )
        #expect(assertion.signCount > registration.signCount)
        #expect(assertion.userHandle == nil, "an allow-list sign-in returns no user handle")
        #expect(
            signIn.process.standardError.lines.contains {
                $0.hasPrefix("verified: alice@example.com signed in to example.com")
            },
            "\(signIn.process.transcript)"
        )
    }

    @Test("SimpleWebAuthn registration options, then its discoverable sign-in options")
    func simpleWebAuthnDiscoverable() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        // Its options ask for credProps: reported as a browser does with a phone (always discoverable).
        let registration = try await register(
            lab,
            fixture: try FixtureOptions("simplewebauthn-registration-options.json"),
            extensionResults: { results in
                #expect((results["credProps"] as? [String: Any])?["rk"] as? Bool == true, "\(results)")
            }
        )
        let userId = try #require(try RelyingPartyStore.load(path: lab.relyingPartyStore).credentials.first?.userId)

        let fixture = try FixtureOptions("simplewebauthn-authentication-options.json")
        let signIn = try await lab.startDesktop(["--request", "ga", "--options", fixture.path])
        let phone = try lab.startPhone(for: signIn, ["--qr", signIn.url])
        #expect(try await signIn.process.waitForExit() == 0, "\(signIn.process.transcript)\n\(phone.transcript)")
        #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")
        let assertion = try WebAuthnResponseVerifier.verifyAuthentication(
            json: try EndToEndLab.credentialJSON(signIn),
            publicKey: registration.publicKey,
            expecting: fixture.expectation,
            credentialId: registration.credentialId,
            userHandle: userId
        )
        #expect(assertion.userHandle == userId, "a discoverable sign-in returns the user handle")
        #expect(assertion.signCount == 1)
    }

    @Test("foreign sign-in options and no stored key: the JSON is printed, the built-in check is skipped")
    func foreignAssertionWithoutStoredKey() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let registration = try await register(
            lab,
            fixture: try FixtureOptions("simplewebauthn-registration-options.json")
        )

        let fixture = try FixtureOptions("simplewebauthn-authentication-options.json")
        let emptyStore = lab.file("other-rp.json")
        let signIn = try await lab.startDesktop([
            "--request", "ga", "--options", fixture.path, "--rp-store", emptyStore,
        ])
        let phone = try lab.startPhone(for: signIn, ["--qr", signIn.url])
        #expect(try await signIn.process.waitForExit() == 0, "\(signIn.process.transcript)\n\(phone.transcript)")
        #expect(try await phone.waitForExit() == 0)
        #expect(
            signIn.process.standardError.lines.contains {
                $0.hasPrefix("built-in relying-party check skipped: the RP store has no key for credential")
            },
            "\(signIn.process.transcript)"
        )
        #expect(!FileManager.default.fileExists(atPath: emptyStore), "nothing verified, nothing stored")
        _ = try WebAuthnResponseVerifier.verifyAuthentication(
            json: try EndToEndLab.credentialJSON(signIn),
            publicKey: registration.publicKey,
            expecting: fixture.expectation
        )
    }

    @Test("py_webauthn sign-in options allow only credentials the phone lacks: both refuse, exit 4, saying none of the allowed ones is there (not that it has none)")
    func allowListWithoutMatch() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        _ = try await register(lab, fixture: try FixtureOptions("simplewebauthn-registration-options.json"))
        let fixture = try FixtureOptions("py_webauthn-authentication-options.json")
        let signIn = try await lab.startDesktop(["--request", "ga", "--options", fixture.path, "--timeout", "10"])
        let phone = try lab.startPhone(for: signIn, ["--qr", signIn.url])
        #expect(try await signIn.process.waitForExit() == 4, "\(signIn.process.transcript)")
        #expect(try await phone.waitForExit() == 4, "\(phone.transcript)")
        #expect(
            FailureOutput.singleErrorLine(signIn.process)
                == "error: none of the 2 credential(s) the relying party allows is on the phone for example.com (CTAP2_ERR_NO_CREDENTIALS)",
            "\(signIn.process.transcript)")
        // It holds one for example.com, just not an allowed one: said so, on the refused line too.
        let reason = "none of this phone's 1 passkey(s) for example.com is among the 2 credential(s) the relying party allows"
        #expect(FailureOutput.singleErrorLine(phone).hasPrefix("error: \(reason)"), "\(phone.transcript)")
        #expect(
            phone.standardError.lines.contains { $0.hasSuffix("refused: \(reason) (answered CTAP2_ERR_NO_CREDENTIALS)") },
            "\(phone.transcript)")
    }
}
