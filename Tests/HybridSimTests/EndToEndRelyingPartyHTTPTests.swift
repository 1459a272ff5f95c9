import CTAP2
import Foundation
import HybridCore
import HybridSim
import Testing

/// `hybrid-sim rp --profile P` + `hybrid-sim desktop --rp-url … --rp-profile P` + `hybrid-sim phone`,
/// as three processes, for every built-in profile: registration then sign-in accepted by the
/// server, and a tampered result rejected by it (desktop exit 5).
@Suite("End to end: desktop --rp-url against hybrid-sim rp (processes)", .serialized)
struct EndToEndRelyingPartyHTTPTests {
    /// Starts `hybrid-sim rp` on a free port; returns it, its URL and its store path.
    private func startServer(_ lab: EndToEndLab, profile: String) async throws -> (ChildProcess, String, String) {
        let store = lab.file("rp-server-\(profile).json")
        let server = try lab.start("rp", ["rp", "--profile", profile, "--port", "0", "--store", store])
        let lines = try await server.waitForOutput("ready line") { $0.contains { $0.contains("http://127.0.0.1:") } }
        let line = try #require(lines.first { $0.contains("http://127.0.0.1:") })
        let url = try #require(line.split(separator: " ").first { $0.hasPrefix("http://") }).description
        return (server, url, store)
    }

    /// Runs one desktop + phone ceremony against the server; returns the desktop's exit status.
    private func ceremony(
        _ lab: EndToEndLab, url: String, profile: String, request: String, extra: [String] = [],
        phoneExtra: [String] = []
    ) async throws -> (status: Int32, desktop: EndToEndLab.Desktop) {
        var arguments = ["--request", request, "--rp-url", url, "--rp-profile", profile, "--timeout", "20"]
        if profile == "okta" { arguments += ["--rp-header", "Authorization: Bearer test-token"] }
        let desktop = try await lab.startDesktop(arguments + extra)
        let phone = try lab.startPhone(for: desktop, ["--scan", try lab.capture(desktop, name: "capture-\(request).txt")] + phoneExtra)
        let status = try await desktop.process.waitForExit()
        #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")
        return (status, desktop)
    }

    @Test(
        "registration then sign-in accepted by the server; a tampered sign-in (or enrolment) rejected with exit 5",
        arguments: RelyingPartyProfile.builtInNames)
    func profileEndToEnd(profile: String) async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (server, url, store) = try await startServer(lab, profile: profile)
        let hasSignIn = RelyingPartyProfile.builtIn[profile]?.authentication != nil

        let registered = try await ceremony(lab, url: url, profile: profile, request: "mc", extra: ["--user", "bob"])
        let transcript = registered.desktop.process.transcript + "\n" + server.transcript
        #expect(registered.status == 0, "\(transcript)")
        #expect(registered.desktop.process.standardError.text.contains("relying party accepted the registration"), "\(transcript)")
        // The desktop's own store is not touched with --rp-url, and its verdict line says who keeps the credential.
        #expect(registered.desktop.process.standardError.text.contains("attestation), kept by the relying party at \(url)"), "\(transcript)")
        var credentials = try RelyingPartyStore.load(path: store).credentials
        #expect(credentials.count == 1, "the server stored the credential\n\(transcript)")
        // The SimpleWebAuthn example server registers a fixed user; the others take --user.
        let expectedUser = RelyingPartyProfile.builtIn[profile]?.registration?.options.path.contains("{user}") == true
            || RelyingPartyProfile.builtIn[profile]?.registration?.options.body?.text.contains("{user}") == true
            ? "bob" : "alice"
        #expect(credentials.first?.userName == expectedUser)
        // A --user the profile cannot carry is said, not silently dropped.
        #expect(
            registered.desktop.process.standardError.text.contains("calls take no account name; --user is not sent")
                == (expectedUser == "alice"), "\(transcript)")
        if profile == "okta" {
            // The plain-string user.id reached the phone as its UTF-8 bytes.
            #expect(credentials.first.map { String(decoding: $0.userId, as: UTF8.self).hasPrefix("00u") } == true)
        }

        if hasSignIn {
            let signedIn = try await ceremony(lab, url: url, profile: profile, request: "ga")
            #expect(signedIn.status == 0, "\(signedIn.desktop.process.transcript)\n\(server.transcript)")
            #expect(signedIn.desktop.process.standardError.text.contains("relying party accepted the sign-in"))
            credentials = try RelyingPartyStore.load(path: store).credentials
            #expect(credentials.first?.signCount == 1, "the server recorded the new counter")
        }

        // Tampered: the server must refuse, the desktop must say so and exit 5 (verification failed).
        let request = hasSignIn ? "ga" : "mc"
        // (An enrolment-only API excludes the phone's existing passkey: a second phone enrols.)
        let tampered = try await ceremony(
            lab, url: url, profile: profile, request: request, extra: ["--debug-tamper-result"],
            phoneExtra: hasSignIn ? [] : ["--store", lab.file("second-phone.json")])
        #expect(tampered.status == 5, "\(tampered.desktop.process.transcript)\n\(server.transcript)")
        let error = FailureOutput.singleErrorLine(tampered.desktop.process)
        #expect(error.contains("the relying party rejected the \(hasSignIn ? "sign-in" : "registration")"), "\(error)")
        #expect(error.contains(hasSignIn ? "signature" : "challenge"), "\(error)")
        #expect(server.standardError.text.contains("rp: rejected a \(hasSignIn ? "sign-in" : "registration")"))
        credentials = try RelyingPartyStore.load(path: store).credentials
        #expect(credentials.count == 1)
        if hasSignIn { #expect(credentials.first?.signCount == 1, "a rejected sign-in changes nothing") }
        server.terminate()
    }

    @Test("account choice: two passkeys for one relying party, a discoverable sign-in, the phone's user picks bob (ForgeRock's selectCredential flow)")
    func accountChoice() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (server, url, store) = try await startServer(lab, profile: "hanko")
        for user in ["alice", "bob"] {
            let registered = try await ceremony(lab, url: url, profile: "hanko", request: "mc", extra: ["--user", user])
            #expect(registered.status == 0, "\(registered.desktop.process.transcript)")
        }
        let signedIn = try await ceremony(lab, url: url, profile: "hanko", request: "ga", phoneExtra: ["--account", "bob"])
        #expect(signedIn.status == 0, "\(signedIn.desktop.process.transcript)\n\(server.transcript)")
        #expect(server.standardError.text.contains("rp: accepted the sign-in of bob"), "\(server.transcript)")
        let credentials = try RelyingPartyStore.load(path: store).credentials
        #expect(credentials.first { $0.userName == "bob" }?.signCount == 1)
        #expect(credentials.first { $0.userName == "alice" }?.signCount == 0)
        server.terminate()
    }

    @Test(
        "against a py_webauthn server (an independent RP library): registration then sign-in accepted, a tampered sign-in rejected",
        .enabled(if: PyWebAuthn.available, Comment(rawValue: PyWebAuthn.missing)))
    func independentServer() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let script = OptionsFixtures.directory.appendingPathComponent("py_webauthn_server.py").path
        let server = try lab.startOther("py_webauthn server", ["python3", "-u", script, "example.com", "https://example.com"])
        let lines = try await server.waitForOutput("ready line") { $0.contains { $0.contains("http://127.0.0.1:") } }
        let url = try #require(lines.first { $0.contains("http://") }?.split(separator: " ").last).description

        let registered = try await ceremony(lab, url: url, profile: "py_webauthn", request: "mc", extra: ["--user", "hana"])
        #expect(registered.status == 0, "\(registered.desktop.process.transcript)\n\(server.transcript)")
        #expect(server.standardError.text.contains("accepted /verify-registration"))
        let signedIn = try await ceremony(lab, url: url, profile: "py_webauthn", request: "ga", extra: ["--user", "hana"])
        #expect(signedIn.status == 0, "\(signedIn.desktop.process.transcript)\n\(server.transcript)")
        #expect(signedIn.desktop.process.standardError.text.contains("sign-in to example.com with 1 allowed credential(s)"))
        #expect(server.standardError.text.contains("accepted /verify-authentication"))
        let tampered = try await ceremony(
            lab, url: url, profile: "py_webauthn", request: "ga", extra: ["--user", "hana", "--debug-tamper-result"])
        #expect(tampered.status == 5, "\(tampered.desktop.process.transcript)\n\(server.transcript)")
        #expect(FailureOutput.singleErrorLine(tampered.desktop.process).contains("InvalidAuthenticationResponse"))
        server.terminate()
    }

    @Test(
        "https URLs speak TLS and check the certificate: a self-signed one is refused (exit 6)",
        .enabled(if: PyWebAuthn.available, Comment(rawValue: PyWebAuthn.missing)))
    func httpsChecksCertificate() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let script = OptionsFixtures.directory.appendingPathComponent("tls_server.py").path
        let server = try lab.startOther("tls server", ["python3", "-u", script])
        let lines = try await server.waitForOutput("ready line") { $0.contains { $0.contains("https://127.0.0.1:") } }
        let url = try #require(lines.first { $0.contains("https://") }?.split(separator: " ").last).description
        let desktop = try lab.start(
            "desktop",
            ["desktop", "--request", "mc", "--rp-url", url, "--rp-profile", "simplewebauthn",
             "--relay-port", "0", "--proximity-port", "0"])
        #expect(try await desktop.waitForExit() == 6, "\(desktop.transcript)")
        #expect(FailureOutput.singleErrorLine(desktop).contains("CERTIFICATE_VERIFY_FAILED"), "\(desktop.transcript)")
        server.terminate()
    }

    @Test("a relying party that accepts and never answers: --timeout 2 bounds the call (exit 3 after about 2 s, not 30 s)")
    func silentRelyingPartyBoundedByTimeout() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (holder, port) = try EndToEndLab.boundSocket(listening: true)
        defer { close(holder) }
        let started = ContinuousClock.now
        let desktop = try lab.start(
            "desktop",
            ["desktop", "--request", "mc", "--rp-url", "http://127.0.0.1:\(port)", "--rp-profile", "hanko", "--timeout", "2",
             "--relay-port", "0", "--proximity-port", "0"])
        #expect(try await desktop.waitForExit(timeout: .seconds(40)) == 3, "\(desktop.transcript)")
        #expect(ContinuousClock.now - started < .seconds(20), "the call waited out its 30 s limit instead of --timeout")
        #expect(FailureOutput.singleErrorLine(desktop).hasSuffix(" did not answer within 2 s"), "\(desktop.transcript)")
    }

    @Test("a user's own profile file (the current Hanko backend's routes) drives both the server and the desktop")
    func ownProfileFile() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let profile = lab.file("my-hanko.json")
        try #"""
            {"name": "my-hanko", "summary": "teamhanko/hanko backend routes", "optionsShape": "publicKey",
             "registration": {
               "options": {"method": "POST", "path": "/webauthn/registration/initialize", "body": {"user_name": "{user}"}},
               "verify": {"method": "POST", "path": "/webauthn/registration/finalize", "body": "{credential}"},
               "success": {"status": [200], "body": {"credential_id": "{credentialId}", "user_id": "{userId}"}}},
             "authentication": {
               "options": {"method": "POST", "path": "/webauthn/login/initialize"},
               "verify": {"method": "POST", "path": "/webauthn/login/finalize", "body": "{credential}"},
               "success": {"status": [200]}}}
            """#.write(toFile: profile, atomically: true, encoding: .utf8)
        let (server, url, store) = try await startServer(lab, profile: profile)
        let registered = try await ceremony(lab, url: url, profile: profile, request: "mc", extra: ["--user", "gina"])
        #expect(registered.status == 0, "\(registered.desktop.process.transcript)\n\(server.transcript)")
        #expect(registered.desktop.process.standardError.text.contains("options: recognised a {\"publicKey\": …} wrapper"))
        #expect(registered.desktop.process.standardError.text.contains("\"credential_id\""))
        let signedIn = try await ceremony(lab, url: url, profile: profile, request: "ga")
        #expect(signedIn.status == 0, "\(signedIn.desktop.process.transcript)\n\(server.transcript)")
        let credentials = try RelyingPartyStore.load(path: store).credentials
        #expect(credentials.map(\.userName) == ["gina"])
        #expect(credentials.first?.signCount == 1)
        server.terminate()
    }

    @Test("an unreachable relying party is a network failure (exit 6); a missing token is named before any socket opens")
    func unreachableAndMissingToken() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let port = try EndToEndLab.closedPort()
        let unreachable = try lab.start(
            "desktop",
            ["desktop", "--request", "mc", "--rp-url", "http://127.0.0.1:\(port)", "--rp-profile", "simplewebauthn",
             "--relay-port", "0", "--proximity-port", "0"])
        #expect(try await unreachable.waitForExit() == 6, "\(unreachable.transcript)")
        #expect(FailureOutput.singleErrorLine(unreachable).contains("cannot reach the relying party"))

        let noToken = try lab.start(
            "desktop",
            ["desktop", "--request", "mc", "--rp-url", "http://127.0.0.1:\(port)", "--rp-profile", "okta",
             "--relay-port", "0", "--proximity-port", "0"])
        #expect(try await noToken.waitForExit() == 2, "\(noToken.transcript)")
        #expect(FailureOutput.singleErrorLine(noToken).contains("OKTA_ACCESS_TOKEN"))
    }
}
