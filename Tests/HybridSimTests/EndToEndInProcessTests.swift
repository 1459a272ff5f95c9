import CTAP2
import Foundation
import HybridCore
import HybridSim
import HybridSimTestSupport
import Synchronization
import Testing

/// The library entry points in one process (what the demo does): ``DesktopProgram`` and
/// ``PhoneProgram`` run concurrently over real loopback sockets, the phone answering the URL the
/// desktop hands to `onReady`.
@Suite("End to end: DesktopProgram and PhoneProgram in one process")
struct EndToEndInProcessTests {
    /// Lines a program printed.
    final class Lines: Sendable {
        private let stored = Mutex<(out: [String], err: [String])>(([], []))
        var output: ProgramOutput {
            ProgramOutput(
                standardOutput: { line in self.stored.withLock { $0.out.append(line) } },
                standardError: { line in self.stored.withLock { $0.err.append(line) } }
            )
        }
        var out: [String] { stored.withLock { $0.out } }
        var err: [String] { stored.withLock { $0.err } }
    }

    /// Runs one desktop transaction with a phone answering it.
    private func transact(
        _ desktop: DesktopConfiguration,
        phone: @escaping @Sendable (String) -> PhoneConfiguration
    ) async throws -> (DesktopResult, PhoneResult, Lines) {
        let lines = Lines()
        let phoneLines = Lines()
        let ready = AsyncStream<DesktopEndpoints>.makeStream()
        async let desktopResult = DesktopProgram.run(desktop, output: lines.output) { endpoints in
            ready.continuation.yield(endpoints)
            ready.continuation.finish()
        }
        var endpoints: DesktopEndpoints?
        for await value in ready.stream { endpoints = value }
        let reached = try #require(endpoints)
        var configuration = phone(reached.url)
        configuration.relayURL = reached.relayURL
        configuration.proximityURL = reached.proximityURL
        async let phoneResult = PhoneProgram.run(configuration, output: phoneLines.output)
        return (try await desktopResult, try await phoneResult, lines)
    }

    @Test("register, then sign in; results verify independently and the stores agree")
    func registerThenSignIn() async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent(
            "hybridsim-inproc-\(UUID().uuidString)"
        ).path
        defer { try? FileManager.default.removeItem(atPath: home) }
        var desktop = DesktopConfiguration()
        desktop.environment = ["HYBRID_SIM_HOME": home]
        desktop.relay = .embedded(port: 0)
        desktop.proximityPort = 0
        desktop.timeout = .seconds(15)
        desktop.request = .makeCredential
        desktop.userName = "carol"
        let phone: @Sendable (String) -> PhoneConfiguration = { url in
            var configuration = PhoneConfiguration(qr: .url(url))
            configuration.environment = ["HYBRID_SIM_HOME": home]
            configuration.timeout = .seconds(15)
            return configuration
        }

        let (registered, created, lines) = try await transact(desktop, phone: phone)
        #expect(registered.relyingPartyCheck == .verified)
        #expect(lines.out.contains { $0.hasPrefix("FIDO:/") })
        let registration = try WebAuthnResponseVerifier.verifyRegistration(
            json: Array(registered.credentialJSON.utf8),
            expecting: .init(challenge: registered.challenge, origin: "https://example.com", rpId: "example.com")
        )
        guard case .registered(let passkey) = created.outcome else {
            Issue.record("expected a registration, got \(created.outcome)")
            return
        }
        #expect(passkey.credentialID == registration.credentialId)
        #expect(passkey.userName == "carol")

        desktop.request = .getAssertion
        desktop.userName = nil
        let (signedIn, used, _) = try await transact(desktop, phone: phone)
        let assertion = try WebAuthnResponseVerifier.verifyAuthentication(
            json: Array(signedIn.credentialJSON.utf8),
            publicKey: registration.publicKey,
            expecting: .init(challenge: signedIn.challenge, origin: "https://example.com", rpId: "example.com")
        )
        #expect(assertion.signCount == 1)
        #expect(signedIn.previousSignCount == 0)
        #expect(signedIn.credential?.signCount == 1)
        #expect(used.passkey.signCount == 1)
    }

    @Test("a refusal is a ProgramFailure of kind refused on both sides")
    func refusal() async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent(
            "hybridsim-inproc-\(UUID().uuidString)"
        ).path
        defer { try? FileManager.default.removeItem(atPath: home) }
        var desktop = DesktopConfiguration()
        desktop.environment = ["HYBRID_SIM_HOME": home]
        desktop.relay = .embedded(port: 0)
        desktop.proximityPort = 0
        desktop.timeout = .seconds(10)
        desktop.request = .makeCredential
        let failure = await #expect(throws: ProgramFailure.self) {
            _ = try await transact(desktop) { url in
                var configuration = PhoneConfiguration(qr: .url(url))
                configuration.environment = ["HYBRID_SIM_HOME": home]
                configuration.timeout = .seconds(10)
                configuration.deny = true
                return configuration
            }
        }
        #expect(failure?.kind == .refused)
        #expect(failure?.exitCode == 4)
    }
}
