import CTAP2
import Foundation
import HybridCore
import HybridSim
import HybridTestSupport
import Testing

/// `hybrid-sim rp --attestation-roots` over HTTP (processes): the options it issues, and its
/// answers (status, body) to a registration carrying packed full attestation (`x5c`), from
/// `desktop --rp-url` with `phone --attestation packed-x5c`, and posted straight to it.
@Suite("End to end: hybrid-sim rp with packed full attestation (processes)", .serialized)
struct EndToEndRelyingPartyAttestationTests {
    /// `hybrid-sim rp --profile hanko` on a free port, with `extra`; returns it and its port.
    private static func startServer(_ lab: EndToEndLab, _ name: String, _ extra: [String]) async throws -> (ChildProcess, Int) {
        let server = try lab.start("rp", ["rp", "--profile", "hanko", "--port", "0", "--store", lab.file("\(name).json")] + extra)
        let lines = try await server.waitForOutput("ready line") { $0.contains { $0.contains("http://127.0.0.1:") } }
        let line = try #require(lines.first { $0.contains("http://127.0.0.1:") })
        let url = try #require(line.split(separator: " ").first { $0.hasPrefix("http://") })
        return (server, try #require(Int(url.split(separator: ":").last ?? "")))
    }

    /// One HTTP/1.1 exchange with the server; the status and the JSON body.
    private static func http(_ port: Int, _ method: String, _ target: String, body: String = "") throws -> (Int, [String: Any]) {
        var request = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
        if method == "POST" { request += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n" }
        let answer = try #require(LoopbackSocket.exchange(port: port, request + "\r\n" + body), "cannot reach 127.0.0.1:\(port)").response
        let status = try #require(Int(answer.split(separator: " ").dropFirst().first ?? ""), "\(answer)")
        let json = try #require(answer.range(of: "\r\n\r\n").map { String(answer[$0.upperBound...]) }, "\(answer)")
        return (status, try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any], "\(answer)"))
    }

    @Test("desktop --rp-url with phone --attestation packed-x5c: rp asks for direct attestation; its root is 200 and chained, another root 400 untrusted")
    func throughTheDesktop() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let root = lab.file("simulated-root.pem")
        let writer = try lab.start("phone", ["phone", "--attestation-root-out", root])
        #expect(try await writer.waitForExit() == 0, "\(writer.transcript)")
        let other = lab.file("other-root.pem")
        try Data(TestAttestationPKI().rootPEM.utf8).write(to: URL(fileURLWithPath: other))

        for (name, roots, accepted) in [("trusted", root, true), ("stranger", other, false)] {
            let (server, port) = try await Self.startServer(lab, name, ["--attestation-roots", roots])
            let desktop = try await lab.startDesktop(
                ["--request", "mc", "--user", "bob", "--rp-url", "http://127.0.0.1:\(port)", "--rp-profile", "hanko", "--timeout", "20"],
                json: true)
            let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url, "--attestation", "packed-x5c"])
            let status = try await desktop.process.waitForExit()
            _ = try await phone.waitForExit()
            server.terminate()
            let transcript = "\(desktop.process.transcript)\n\(phone.transcript)\n\(server.transcript)"
            // The statement reached the relying party: the desktop did not replace it for "none".
            #expect(!desktop.process.standardError.text.contains("attestation \"none\" requested"), "\(transcript)")
            let verdict = try #require(try JSONEvents.all(desktop.process).first { $0["event"] as? String == "rpVerdict" }, "\(transcript)")
            #expect(verdict["accepted"] as? Bool == accepted, "\(transcript)")
            let body = verdict["body"] as? String ?? ""
            if accepted {
                #expect(status == 0, "\(transcript)")
                #expect(verdict["status"] as? Int == 200, "\(transcript)")
                #expect(body.contains("\"credential_id\""), "\(transcript)")
                #expect(
                    server.standardError.text.contains(
                        "(signCount 0, packed attestation: basic, x5c of 1 certificate, chained to trusted root CN=\(SimulatedAttestationCA.rootCommonName)"),
                    "\(transcript)")
            } else {
                #expect(status == 5, "\(transcript)")
                #expect(verdict["status"] as? Int == 400, "\(transcript)")
                #expect(body.contains("\"verified\":false"), "\(transcript)")
                #expect(body.contains("untrusted attestation: packed: packed x5c[0]"), "\(transcript)")
                #expect(server.standardError.text.contains("rp: rejected a registration: untrusted attestation: packed:"), "\(transcript)")
                #expect(try RelyingPartyStore.load(path: lab.file("\(name).json")).credentials.isEmpty, "\(transcript)")
            }
        }
    }

    @Test("posted straight to rp: options say none without roots and direct with; the x5c registration is 200 either way, and says whether it is chained")
    func postedStraight() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let root = lab.file("simulated-root.pem")
        try Data(SimulatedAttestationCA.rootPEM().utf8).write(to: URL(fileURLWithPath: root))

        for (name, extra) in [("open", [String]()), ("anchored", ["--attestation-roots", root])] {
            let (server, port) = try await Self.startServer(lab, name, extra)
            defer { server.terminate() }
            let (optionsStatus, document) = try Self.http(port, "GET", "/registration_initialize?user_name=zoe")
            #expect(optionsStatus == 200, "\(document)")
            let options = try #require(document["publicKey"] as? [String: Any], "\(document)")
            #expect(options["attestation"] as? String == (extra.isEmpty ? "none" : "direct"), "\(name): \(options)")
            let challenge = try #require((options["challenge"] as? String).flatMap { Base64URL.decode($0) })
            let userId = try #require(((options["user"] as? [String: Any])?["id"] as? String).flatMap { Base64URL.decode($0) })

            // What a phone with packed-x5c answers, as a client that passes the statement on posts it.
            var authenticator = SoftwareAuthenticator()
            let clientDataJSON = CollectedClientData(type: .create, challenge: challenge, origin: "https://example.com").json
            let request = MakeCredentialRequest(
                clientDataHash: CollectedClientData.hash(ofJSON: clientDataJSON),
                rp: PublicKeyCredentialRpEntity(id: "example.com", name: "example.com"),
                user: PublicKeyCredentialUserEntity(id: userId, name: "zoe", displayName: "zoe"),
                pubKeyCredParams: [PublicKeyCredentialParameters(alg: .es256)], options: AuthenticatorOptions(rk: true, uv: true))
            let (bytes, _) = authenticator.handle(
                CTAP2Request.makeCredential(request).encode(), policy: .init(attestation: .packedFull),
                now: UInt64(Date().timeIntervalSince1970))
            let response = try CTAP2Response(bytes: bytes).decodePayload(as: MakeCredentialResponse.self)
            let credential = try RegistrationResponseJSON(response: response, clientDataJSON: clientDataJSON).jsonString()
            let (status, answer) = try Self.http(port, "POST", "/registration_finalize", body: credential)
            #expect(status == 200, "\(name): \(answer)\n\(server.transcript)")
            #expect(answer["credential_id"] is String, "\(name): \(answer)")
            let trust = extra.isEmpty ? "not chained to a trusted root)" : "chained to trusted root CN=\(SimulatedAttestationCA.rootCommonName)"
            _ = try await server.waitForOutput("verdict line", in: \.standardError) { $0.contains { $0.contains("rp: accepted") } }
            #expect(
                server.standardError.text.contains("packed attestation: basic, x5c of 1 certificate, \(trust)"),
                "\(name): \(server.transcript)")
        }
    }
}
