import CTAP2
import HybridCore
import HybridRuntime
import Testing

/// Faults of the proximity check: the desktop must end at its advert timeout with
/// `noNearbyAuthenticator` and counters that say why, and the phone must give up on its own.
@Suite("Faults: proximity", .timeLimit(.minutes(1)))
struct FaultProximityTests {
    @Test("only another session's advert is heard: the desktop reports no nearby authenticator, counting it as not ours")
    func advertFromAnotherSession() async throws {
        try await withHarness { harness in
            let account = Account.make("alice")
            var rig = SessionRig(relayURL: harness.relayURL, phone: SimulatedPhone(passkeys: [account.passkey]))
            // The phone scanned someone else's QR code but advertises to this desktop's scanner.
            rig.phoneQR = { _ in ClientSession(requestType: .getAssertion, timestamp: unixNow()).url }
            rig.timeouts.advert = .seconds(1)
            rig.timeouts.handshake = .milliseconds(1500)
            rig.desktopWaitsForAdvertising = true
            let outcome = try await rig.run(request: signInRequest(), hint: .getAssertion)

            let desktop = try #require(outcome.desktopError())
            #expect(desktop.side == .desktop)
            #expect(desktop.step == "waiting for a nearby phone")
            #expect(desktop.runtimeCode == .noNearbyAuthenticator)
            let statistics = try #require((desktop.underlying as? RuntimeError)?.proximityStatistics)
            #expect(statistics.matched == 0)
            #expect(statistics.notOurs >= 1)
            #expect(statistics.received == statistics.notOurs, "\(statistics)")
            #expect("\(desktop)".contains("not ours"))

            // Nobody joins the phone's tunnel: it gives up at its handshake timeout.
            let phone = try #require(outcome.phoneError())
            #expect(phone.step == "waiting for the desktop's handshake")
            #expect(phone.runtimeCode == .timeout)
            #expect(outcome.elapsed < rig.timeouts.total)
            #expect(harness.relay.statistics.tunnelsJoined == 0)
            #expect(await eventually { harness.relay.openTunnelCount == 0 })
        }
    }

    @Test("a phone at -90 dBm with a -70 dBm threshold is too far: no nearby authenticator at the desktop's timeout")
    func tooFar() async throws {
        try await withHarness { harness in
            let account = Account.make("alice")
            var rig = SessionRig(relayURL: harness.relayURL, phone: SimulatedPhone(passkeys: [account.passkey]))
            rig.rssi = -90
            rig.minRSSI = -70
            rig.timeouts.advert = .seconds(1)
            rig.timeouts.handshake = .milliseconds(1500)
            rig.desktopWaitsForAdvertising = true
            let outcome = try await rig.run(request: signInRequest(), hint: .getAssertion)

            let desktop = try #require(outcome.desktopError())
            #expect(desktop.side == .desktop)
            #expect(desktop.step == "waiting for a nearby phone")
            #expect(desktop.runtimeCode == .noNearbyAuthenticator)
            #expect("\(desktop)".contains("too far"), "\(desktop)")
            let statistics = try #require((desktop.underlying as? RuntimeError)?.proximityStatistics)
            #expect(statistics.tooFar >= 1)
            #expect(statistics.strongestTooFarRSSI == -90)
            #expect(statistics.matched == 0)

            let phone = try #require(outcome.phoneError())
            #expect(phone.step == "waiting for the desktop's handshake")
            #expect(phone.runtimeCode == .timeout)
            #expect(outcome.elapsed < rig.timeouts.total)
            #expect(await eventually { harness.relay.openTunnelCount == 0 })
        }
    }

    @Test("through the harness, a desktop that finds no phone ends the sign-in without waiting for the phone")
    func harnessCancelsThePhone() async throws {
        try await withHarness { harness in
            let account = Account.make("alice")
            let phone = SimulatedPhone(passkeys: [account.passkey])
            var options = HybridHarness.TransactionOptions()
            options.rssi = -90
            options.minRSSI = -70
            // The phone would wait 30 s for a handshake: the harness must cancel it when the desktop
            // fails at its 2 s advert timeout, and the phone must still close its tunnel.
            options.timeouts.advert = .seconds(2)
            options.timeouts.handshake = .seconds(30)
            let start = ContinuousClock.now
            let error = await #expect(throws: TransactionError.self) {
                try await harness.signIn(
                    on: phone, relyingParty: exampleRP, knownCredentials: [account.credential], options: options)
            }
            #expect(error?.side == .desktop)
            #expect(error?.runtimeCode == .noNearbyAuthenticator)
            #expect(ContinuousClock.now - start < options.timeouts.handshake)
            #expect(phone.outcomes.isEmpty)
            #expect(await eventually { harness.relay.openTunnelCount == 0 })
        }
    }
}
