import CTAP2
import HybridCore
import HybridRuntime
import Synchronization
import Testing

/// The harness runs any `HarnessAuthenticator`, not only `SimulatedPhone`: an outside
/// implementer's authenticator logic gets HybridSim's desktop, relay and relying party around it.
@Suite("Harness: your own authenticator", .serialized, .timeLimit(.minutes(1)))
struct HarnessAuthenticatorTests {
    /// Authenticator logic of "your own": it forwards to a simulated phone and records the
    /// commands it answered.
    final class Recording: HarnessAuthenticator {
        let inner = SimulatedPhone()
        let commands = Mutex<[UInt8]>([])
        var getInfo: [UInt8] { inner.getInfo }
        func respond(to request: [UInt8], now: UInt64) async -> [UInt8] {
            commands.withLock { $0.append(request.first ?? 0) }
            return inner.respond(to: request, now: now)
        }
    }

    /// One that refuses everything, as a user who says no.
    struct Refusing: HarnessAuthenticator {
        var getInfo: [UInt8] { SimulatedPhone().getInfo }
        func respond(to request: [UInt8], now: UInt64) async -> [UInt8] { [CTAP2StatusCode.operationDenied.rawValue] }
    }

    static let relyingParty = RelyingParty(id: "example.com", origin: "https://example.com")

    @Test("register and sign in on your own authenticator, over the loopback relay and in memory")
    func ownAuthenticator() async throws {
        let mine = Recording()
        let harness = try await HybridHarness.start()
        let credential = try await harness.register(on: mine, relyingParty: Self.relyingParty, userName: "alice")
        let signedIn = try await harness.signIn(on: mine, relyingParty: Self.relyingParty, knownCredentials: [credential])
        await harness.shutdown()
        #expect(signedIn.signCount == credential.signCount + 1)
        let again = try await HybridHarness.signInInMemory(on: mine, relyingParty: Self.relyingParty, knownCredentials: [signedIn])
        #expect(again.signCount == signedIn.signCount + 1)
        #expect(mine.commands.withLock { $0 } == [0x01, 0x02, 0x02], "makeCredential, then two getAssertions")
    }

    @Test("your authenticator's refusal is the relying party's failure, with its status")
    func refusingAuthenticator() async throws {
        let error = await #expect(throws: Ceremony.Failure.self) {
            _ = try await HybridHarness.registerInMemory(on: Refusing(), relyingParty: Self.relyingParty, userName: "alice")
        }
        #expect(error?.status == .operationDenied, "\(String(describing: error))")
    }
}
