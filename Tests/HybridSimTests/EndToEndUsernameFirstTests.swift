import CTAP2
import Foundation
import HybridCore
import HybridSim
import Testing

/// `hybrid-sim desktop --request ga --user NAME`: a username-first sign-in whose allow list is that
/// account's stored credentials (processes).
@Suite("End to end: --user on a sign-in builds the allow list (processes)", .serialized)
struct EndToEndUsernameFirstTests {
    private func run(_ lab: EndToEndLab, _ arguments: [String]) async throws -> EndToEndLab.Desktop {
        let desktop = try await lab.startDesktop(arguments)
        let phone = try lab.startPhone(for: desktop, ["--scan", try lab.capture(desktop)])
        #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)\n\(phone.transcript)")
        #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")
        return desktop
    }

    @Test("two accounts on one phone: --user bob allows only bob's credential and signs bob in; an unknown user is bad input")
    func usernameFirst() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        _ = try await run(lab, ["--request", "mc", "--user", "alice"])
        _ = try await run(lab, ["--request", "mc", "--user", "bob"])
        let stored = try RelyingPartyStore.load(path: lab.relyingPartyStore).credentials
        let bob = try #require(stored.first { $0.userName == "bob" })

        let signIn = try await run(lab, ["--request", "ga", "--user", "bob"])
        let errors = signIn.process.standardError.text
        #expect(errors.contains("sign-in to example.com with 1 allowed credential(s)"), "\(errors)")
        #expect(errors.contains("verified: bob signed in to example.com with credential \(Base64URL.encode(bob.credentialId))"), "\(errors)")
        let credential = try #require(
            try JSONSerialization.jsonObject(with: Data(EndToEndLab.credentialJSON(signIn))) as? [String: Any])
        #expect(credential["id"] as? String == Base64URL.encode(bob.credentialId))

        let unknown = try lab.start("desktop", ["desktop", "--request", "ga", "--user", "carol", "--relay-port", "0", "--proximity-port", "0"])
        #expect(try await unknown.waitForExit() == 2, "\(unknown.transcript)")
        #expect(FailureOutput.singleErrorLine(unknown).contains("no credential for carol @ example.com"))
    }
}
