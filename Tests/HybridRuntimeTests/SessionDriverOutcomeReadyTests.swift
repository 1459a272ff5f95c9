import CTAP2
import HybridCore
import HybridRuntime
import Testing

/// The desktop hands its outcome over before the tunnel's closing handshake, so a relying party can
/// verify while the tunnel closes (``ClientDriver/run(session:request:transports:timeouts:events:outcomeReady:)``).
@Suite("Desktop: the outcome before the closing handshake", .timeLimit(.minutes(1)))
struct SessionDriverOutcomeReadyTests {
    @Test("shutdown sent, then the outcome handed over, then the tunnel closed; run returns the same outcome")
    func order() async throws {
        try await withHarness { harness in
            let account = Account.make("alice")
            var rig = SessionRig(relayURL: harness.relayURL, phone: SimulatedPhone(passkeys: [account.passkey]))
            let log = LockedBox<[String]>([])
            rig.desktopTransports = { transports in
                transports.wrappingTunnel { tunnel in TunnelTap(tunnel, onClose: { log.update { $0.append("closed") } }) }
            }
            rig.events = { event in
                if case .shutdownSent = event { log.update { $0.append("shutdown sent") } }
            }
            let handed = LockedBox<[UInt8]?>(nil)
            rig.outcomeReady = { outcome in
                handed.update { $0 = outcome.response }
                log.update { $0.append("outcome") }
            }
            let outcome = try await rig.run(request: signInRequest(), hint: .getAssertion)

            let response = try outcome.desktop.get().response
            #expect(handed.value == response)
            #expect(response.first == CTAP2StatusCode.ok.rawValue)
            #expect(log.value == ["shutdown sent", "outcome", "closed"])
            if case .failure(let error) = outcome.phone { Issue.record("the phone failed: \(error)") }
        }
    }

    @Test("a transaction that fails never hands over an outcome")
    func noOutcomeOnFailure() async throws {
        try await withHarness { harness in
            // The phone never advertises: the desktop ends with noNearbyAuthenticator, having never
            // had a response to hand over.
            var rig = SessionRig(relayURL: harness.relayURL, phone: SimulatedPhone())
            rig.timeouts.advert = .milliseconds(300)
            rig.timeouts.handshake = .milliseconds(500)
            rig.phoneTransports = { transports in
                AuthenticatorDriver.Transports(createTunnel: transports.createTunnel, advertise: { _ in SilentAdvert() })
            }
            let calls = LockedBox(0)
            rig.outcomeReady = { _ in calls.update { $0 += 1 } }
            let outcome = try await rig.run(request: signInRequest(), hint: .getAssertion)
            #expect(outcome.desktopError()?.runtimeCode == .noNearbyAuthenticator)
            #expect(calls.value == 0)
        }
    }
}

/// An advertiser that never sends anything.
private struct SilentAdvert: AuthenticatorDriver.Advertisement {
    func stop() async {}
}
