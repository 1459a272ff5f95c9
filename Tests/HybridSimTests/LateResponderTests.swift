import CTAP2
import Foundation
import HybridCore
import HybridSim
import Synchronization
import Testing

/// A phone whose answer comes after its deadline writes nothing (Docs/STORES.md).
@Suite("Phone: a late answer is never saved")
struct LateResponderTests {
    @Test("the user picks an account after the phone's deadline: the store is not written")
    func lateChoiceIsNotSaved() async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent(
            "hybridsim-late-\(UUID().uuidString)"
        ).path
        defer { try? FileManager.default.removeItem(atPath: home) }
        let storePath = home + "/passkeys.json"
        // Two passkeys for example.com, so the phone asks which one.
        try PasskeyStore(path: storePath, passkeys: try StoreSamples.passkeys(count: 2)).save()
        let before = try Data(contentsOf: URL(fileURLWithPath: storePath))

        var desktop = DesktopConfiguration()
        desktop.environment = ["HYBRID_SIM_HOME": home]
        desktop.relay = .embedded(port: 0)
        desktop.proximityPort = 0
        desktop.timeout = .seconds(20)
        desktop.request = .getAssertion

        let chose = Mutex(false)
        let ready = AsyncStream<DesktopEndpoints>.makeStream()
        let discard = ProgramOutput(standardOutput: { _ in }, standardError: { _ in })
        async let desktopRun: Void = { _ = try? await DesktopProgram.run(desktop, output: discard) { endpoints in
            ready.continuation.yield(endpoints)
            ready.continuation.finish()
        } }()
        var endpoints: DesktopEndpoints?
        for await value in ready.stream { endpoints = value }
        let reached = try #require(endpoints)

        var phone = PhoneConfiguration(qr: .url(reached.url))
        phone.environment = ["HYBRID_SIM_HOME": home]
        phone.relayURL = reached.relayURL
        phone.proximityURL = reached.proximityURL
        phone.timeout = .seconds(3)
        phone.chooseAccount = { _, accounts in
            // A person who answers after the deadline; the wait ignores cancellation on purpose.
            await withCheckedContinuation { continuation in
                DispatchQueue.global().asyncAfter(deadline: .now() + 5) { continuation.resume() }
            }
            chose.withLock { $0 = true }
            return accounts.first
        }
        let failure = await #expect(throws: ProgramFailure.self) {
            _ = try await PhoneProgram.run(phone, output: discard)
        }
        #expect(failure?.kind == .timeout, "\(String(describing: failure))")
        _ = await desktopRun

        // Wait (a condition poll with a deadline) until the late choice was made...
        let deadline = ContinuousClock.now + .seconds(15)
        while !chose.withLock({ $0 }), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(chose.withLock { $0 })
        // ...then check that no write follows. The absence of a write can only be observed over a
        // window: this sleep is the behaviour under test, not a synchronisation. (What would write
        // runs synchronously right after the chooser returns, so a second is ample; a regression
        // that did write would be seen here on every run, not flakily.)
        try await Task.sleep(for: .seconds(1))
        #expect(try Data(contentsOf: URL(fileURLWithPath: storePath)) == before)
        #expect(try PasskeyStore.load(path: storePath).passkeys.map(\.signCount) == [0, 0])
    }
}
