import CTAP2
import Foundation
import HybridCore
import HybridSim
import HybridSimTestSupport
import Testing

/// The newcomer's path with the real binary, one process per role: `hybrid-sim desktop` shows a
/// QR code, `hybrid-sim phone` scans the terminal art it printed, a passkey is registered, then
/// used to sign in, and what the desktop printed is verified independently.
@Suite("End to end: register, then sign in (processes)", .serialized)
struct EndToEndRegisterSignInTests {
    @Test("phone scans the printed terminal art: register, then sign in with a higher signCount")
    func scanRegisterThenSignIn() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }

        // Register.
        let desktop = try await lab.startDesktop(["--request", "mc"])
        #expect(desktop.art.count > 10, "the QR code's terminal art precedes the URL")
        let phone = try lab.startPhone(for: desktop, ["--scan", try lab.capture(desktop)])
        #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)\n\(phone.transcript)")
        #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")
        let registration = try WebAuthnResponseVerifier.verifyRegistration(
            json: try EndToEndLab.credentialJSON(desktop),
            expecting: EndToEndLab.expectation(desktop)
        )
        #expect(registration.attestationFormat == "none")
        #expect(registration.flags.contains(.userPresent))

        // Narration on both sides, in order.
        let desktopSteps = [
            "waiting for a nearby phone", "advert accepted (rssi -45 dBm", "tunnel connected", "handshake done",
            "request sent (makeCredential,", "response received", "verified: registered credential",
        ]
        try expectInOrder(desktopSteps, in: desktop.process.standardError.lines, desktop.process)
        let phoneSteps = [
            "QR for a registration request (mc); connecting to relay \(desktop.relayURL)",
            "tunnel created, advertising (rssi -45 dBm) to \(desktop.proximityURL)", "handshake done",
            "registered a passkey for alice @ example.com", "done",
        ]
        try expectInOrder(phoneSteps, in: phone.standardError.lines, phone)

        // Both stores hold the credential, with mode 0600.
        let passkeys = try PasskeyStore.load(path: lab.passkeyStore)
        #expect(passkeys.passkeys.map(\.credentialID) == [registration.credentialId])
        let credentials = try RelyingPartyStore.load(path: lab.relyingPartyStore)
        #expect(credentials.credentials.map(\.credentialId) == [registration.credentialId])
        #expect(try permissions(lab.passkeyStore) == 0o600)
        #expect(try permissions(lab.relyingPartyStore) == 0o600)

        // Sign in twice: each verifies with the registered key, and the counter goes up.
        var lastCount = registration.signCount
        for round in 1...2 {
            let signIn = try await lab.startDesktop(["--request", "ga"])
            let phone = try lab.startPhone(
                for: signIn,
                ["--scan", try lab.capture(signIn, name: "capture-\(round).txt")]
            )
            #expect(try await signIn.process.waitForExit() == 0, "\(signIn.process.transcript)\n\(phone.transcript)")
            #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")
            let assertion = try WebAuthnResponseVerifier.verifyAuthentication(
                json: try EndToEndLab.credentialJSON(signIn),
                publicKey: registration.publicKey,
                expecting: EndToEndLab.expectation(signIn),
                credentialId: registration.credentialId,
                userHandle: credentials.credentials[0].userId
            )
            #expect(assertion.signCount > lastCount)
            #expect(assertion.userHandle == credentials.credentials[0].userId)
            lastCount = assertion.signCount
            #expect(phone.standardError.lines.contains("signing in to example.com as alice"), "\(phone.transcript)")
            #expect(
                signIn.process.standardError.lines.contains { $0.contains("verified: alice signed in to example.com") }
            )
        }
        #expect(try RelyingPartyStore.load(path: lab.relyingPartyStore).credentials[0].signCount == lastCount)
        #expect(try PasskeyStore.load(path: lab.passkeyStore).passkeys[0].signCount == lastCount)
    }

    @Test("--qr with the URL line, through a separately started `hybrid-sim relay`, packed attestation")
    func qrURLWithExternalRelay() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (relay, relayURL) = try await lab.startRelay()

        let desktop = try await lab.startDesktop(["--request", "mc", "--relay", relayURL, "--user", "bob"])
        #expect(desktop.relayURL == relayURL)
        let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url, "--attestation", "packed"])
        #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)\n\(phone.transcript)")
        #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")
        let registration = try WebAuthnResponseVerifier.verifyRegistration(
            json: try EndToEndLab.credentialJSON(desktop),
            expecting: EndToEndLab.expectation(desktop)
        )
        #expect(registration.attestationFormat == "packed")

        let signIn = try await lab.startDesktop(["--relay", relayURL])  // --request ga is the default
        let signer = try lab.startPhone(for: signIn, ["--qr", signIn.url])
        #expect(try await signIn.process.waitForExit() == 0, "\(signIn.process.transcript)\n\(signer.transcript)")
        #expect(try await signer.waitForExit() == 0, "\(signer.transcript)")
        let assertion = try WebAuthnResponseVerifier.verifyAuthentication(
            json: try EndToEndLab.credentialJSON(signIn),
            publicKey: registration.publicKey,
            expecting: EndToEndLab.expectation(signIn),
            credentialId: registration.credentialId
        )
        #expect(assertion.signCount > registration.signCount)
        #expect(relay.isRunning, "the external relay outlives both transactions")
    }

    @Test("--json on both sides: every line is an event, in protocol order; --qr-png is scanned")
    func jsonEvents() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let png = lab.file("qr.png")
        // A symlink planted at the --qr-png path is replaced, not followed, and the image is 0600.
        let planted = lab.file("planted.txt")
        try Data("do not touch".utf8).write(to: URL(fileURLWithPath: planted))
        try FileManager.default.createSymbolicLink(atPath: png, withDestinationPath: planted)
        let desktop = try await lab.startDesktop(["--request", "mc", "--qr-png", png], json: true)
        #expect(desktop.art.isEmpty)
        // No art to capture in --json mode: the phone command names the PNG (and the url for --qr).
        #expect(desktop.process.standardError.lines.contains { $0.hasPrefix("phone command: hybrid-sim phone --scan \(png) --relay ") })
        #expect(try permissions(png) == 0o600)
        #expect(try String(contentsOfFile: planted, encoding: .utf8) == "do not touch")
        #expect(try FileManager.default.attributesOfItem(atPath: png)[.type] as? FileAttributeType == .typeRegular)
        let phone = try lab.startPhone(for: desktop, ["--scan", png, "--json"])
        #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)\n\(phone.transcript)")
        #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")

        let events = try JSONEvents.all(desktop.process)
        #expect(
            events.compactMap { $0["event"] as? String } == [
                "qr", "advert", "connected", "handshake", "request", "response", "result",
            ]
        )
        #expect(events[0]["url"] as? String == desktop.url)
        #expect(events[0]["relay"] as? String == desktop.relayURL)
        #expect(events[1]["rssi"] as? Int == -45)
        #expect(events[4]["command"] as? String == "makeCredential")
        #expect(events[5]["status"] as? String == "CTAP2_OK")
        let result = events[6]
        #expect(result["rpCheck"] as? String == "verified")
        let credential = try JSONSerialization.data(
            withJSONObject: try #require(result["credential"] as? [String: Any])
        )
        let registration = try WebAuthnResponseVerifier.verifyRegistration(
            json: Array(credential),
            expecting: EndToEndLab.expectation(desktop)
        )

        let phoneEvents = try JSONEvents.all(phone)
        #expect(
            phoneEvents.compactMap { $0["event"] as? String } == [
                "qr", "connected", "advert", "handshake", "request", "response", "result",
            ]
        )
        #expect(phoneEvents.last?["outcome"] as? String == "registered")
        #expect(phoneEvents.last?["credentialId"] as? String == Base64URL.encode(registration.credentialId))
        // Both sides' results name the credential, the account and the counter alike.
        for name in ["credentialId", "user", "signCount"] {
            #expect("\(result[name] ?? "absent")" == "\(phoneEvents.last?[name] ?? "absent")", "\(name): \(result) vs \(phoneEvents.last ?? [:])")
        }

        // A sign-in in --json mode ends with a result too.
        let signIn = try await lab.startDesktop([], json: true)
        // The line runs as it is, pasted into a shell: the qr event's url in it, in the environment
        // (HYBRID_SIM_QR), not among the phone's arguments, which `ps` shows every user.
        let prefix = "phone command: HYBRID_SIM_QR=\(signIn.url) hybrid-sim phone --relay \(signIn.relayURL) --proximity \(signIn.proximityURL)  ("
        let line = try #require(signIn.process.standardError.lines.first { $0.hasPrefix(prefix) }, "\(signIn.process.transcript)")
        let pasted = String(line.dropFirst("phone command: ".count).prefix { $0 != "(" }).trimmingCharacters(in: .whitespaces)
        let directory = try HybridSimBinary.url().deletingLastPathComponent().path
        let signer = try lab.startOther("pasted phone", ["bash", "-c", "PATH='\(directory)':\"$PATH\" && \(pasted)"])
        #expect(try await signIn.process.waitForExit() == 0, "\(signIn.process.transcript)\n\(signer.transcript)")
        #expect(try await signer.waitForExit() == 0)
        let signInEvents = try JSONEvents.all(signIn.process)
        #expect(
            signInEvents.compactMap { $0["event"] as? String } == [
                "qr", "advert", "connected", "handshake", "request", "response", "result",
            ]
        )
        #expect(signInEvents[4]["command"] as? String == "getAssertion")
        #expect(signInEvents.last?["user"] as? String == "alice")
        #expect(signInEvents.last?["signCount"] as? Int == 1, "the counter the relying party now holds")
        #expect(signInEvents.last?["credentialId"] as? String == Base64URL.encode(registration.credentialId))
        let assertion = try JSONSerialization.data(
            withJSONObject: try #require(signInEvents.last?["credential"] as? [String: Any])
        )
        _ = try WebAuthnResponseVerifier.verifyAuthentication(
            json: Array(assertion),
            publicKey: registration.publicKey,
            expecting: EndToEndLab.expectation(signIn)
        )
    }

    @Test("several passkeys for one site: --account picks one; without it the phone lists the accounts and refuses")
    func accountSelection() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        var keys: [String: COSEKey] = [:]
        for name in ["alice", "bob"] {
            let desktop = try await lab.startDesktop(["--request", "mc", "--user", name])
            let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url])
            #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)\n\(phone.transcript)")
            #expect(try await phone.waitForExit() == 0)
            keys[name] = try WebAuthnResponseVerifier.verifyRegistration(
                json: try EndToEndLab.credentialJSON(desktop),
                expecting: EndToEndLab.expectation(desktop)
            ).publicKey
        }

        let ambiguous = try await lab.startDesktop(["--timeout", "10"])
        let unsure = try lab.startPhone(for: ambiguous, ["--qr", ambiguous.url])
        #expect(try await unsure.waitForExit() == 4, "\(unsure.transcript)")
        #expect(try await ambiguous.process.waitForExit() == 4, "\(ambiguous.process.transcript)")
        let phoneError = FailureOutput.singleErrorLine(unsure)
        #expect(
            phoneError.contains("2 passkeys for example.com match (alice, bob); choose one with --account NAME"),
            "\(phoneError)"
        )
        #expect(FailureOutput.singleErrorLine(ambiguous.process).hasSuffix(
            "CTAP2_ERR_OPERATION_DENIED (the user said no, or chose no account: the phone's output says which)"))

        // --deny with several accounts: the user refuses, whichever it would be; no account choice.
        let denied = try await lab.startDesktop(["--timeout", "10"])
        let denying = try lab.startPhone(for: denied, ["--qr", denied.url, "--deny"])
        #expect(try await denying.waitForExit() == 4, "\(denying.transcript)")
        #expect(try await denied.process.waitForExit() == 4, "\(denied.process.transcript)")
        #expect(FailureOutput.singleErrorLine(denying) == "error: refused the getAssertion request from example.com (--deny): answered CTAP2_ERR_OPERATION_DENIED",
                "\(denying.transcript)")

        // On a terminal the phone asks; an answer that names no account is asked again, not a refusal.
        let asked = try await lab.startDesktop([])
        let binary = try HybridSimBinary.url().path
        let terminal = try lab.startOther(
            "phone on a terminal",
            ["script", "-qec", "'\(binary)' phone --relay \(asked.relayURL) --proximity \(asked.proximityURL) --qr \(asked.url)", "/dev/null"],
            standardInput: .piped(Array("zed\n2\n".utf8)))
        #expect(try await terminal.waitForExit() == 0, "\(terminal.transcript)\n\(asked.process.transcript)")
        #expect(try await asked.process.waitForExit() == 0, "\(asked.process.transcript)")
        #expect(terminal.standardOutput.text.contains("\"zed\" is none of them; answer 1-2 or an account's name"), "\(terminal.transcript)")
        #expect(asked.process.standardError.text.contains("verified: bob signed in"), "\(asked.process.transcript)")
        // Three answers that name none: the phone gives up (exit 4), as for an empty answer.
        let unanswered = try await lab.startDesktop(["--timeout", "20"])
        let stubborn = try lab.startOther(
            "phone on a terminal, three wrong answers",
            ["script", "-qec", "'\(binary)' phone --relay \(unanswered.relayURL) --proximity \(unanswered.proximityURL) --qr \(unanswered.url)",
             "/dev/null"],
            standardInput: .piped(Array("zed\ncarol\n9\n".utf8)))
        #expect(try await stubborn.waitForExit() == 4, "\(stubborn.transcript)")
        #expect(try await unanswered.process.waitForExit() == 4, "\(unanswered.process.transcript)")
        #expect(stubborn.standardOutput.text.contains("\"9\" is none of them either; giving up"), "\(stubborn.transcript)")

        let signIn = try await lab.startDesktop([])
        let phone = try lab.startPhone(for: signIn, ["--qr", signIn.url, "--account", "bob"])
        #expect(try await signIn.process.waitForExit() == 0, "\(signIn.process.transcript)\n\(phone.transcript)")
        #expect(try await phone.waitForExit() == 0)
        _ = try WebAuthnResponseVerifier.verifyAuthentication(
            json: try EndToEndLab.credentialJSON(signIn),
            publicKey: try #require(keys["bob"]),
            expecting: EndToEndLab.expectation(signIn)
        )
        #expect(phone.standardError.lines.contains("signing in to example.com as bob"))
    }

    // MARK: - Helpers

    private func expectInOrder(
        _ fragments: [String],
        in lines: [String],
        _ process: ChildProcess,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        var index = 0
        for fragment in fragments {
            guard let found = lines[index...].firstIndex(where: { $0.contains(fragment) }) else {
                Issue.record(
                    "\"\(fragment)\" missing or out of order\n\(process.transcript)",
                    sourceLocation: sourceLocation
                )
                return
            }
            index = found + 1
        }
    }

    private func permissions(_ path: String) throws -> Int {
        ((try FileManager.default.attributesOfItem(atPath: path))[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }
}
