import CTAP2
import HybridCore
import HybridRuntime
import Testing

/// Faults on the phone's side: it leaves, falls silent, refuses, or has nothing to sign with.
@Suite("Faults: phone", .timeLimit(.minutes(1)))
struct FaultPhoneTests {
    @Test("the phone's connection goes away after the handshake: the desktop ends at once with 1001")
    func phoneLeavesAfterHandshake() async throws {
        try await withHarness { harness in
            let account = Account.make("alice")
            let simulated = SimulatedPhone(passkeys: [account.passkey])
            var rig = SessionRig(relayURL: harness.relayURL, phone: simulated)
            // Message 2, the post-handshake message and the update message are the phone's first
            // three sends; then the phone goes away (1001, as its OS would say when the app is
            // killed). The desktop may already have sent its request by then: a phone that has left
            // reads nothing more, so the tap drops whatever arrives afterwards.
            rig.phoneTransports = { transports in
                transports.wrappingTunnel { tunnel in
                    let left = LockedBox(false)
                    return TunnelTap(
                        tunnel,
                        afterSend: { sent, inner in
                            guard sent == 3 else { return }
                            left.update { $0 = true }
                            await (inner as? WebSocketTunnel)?.close(code: .goingAway, reason: "phone left")
                        },
                        onReceive: { _, message in left.value ? nil : message })
                }
            }
            let outcome = try await rig.run(request: signInRequest(), hint: .getAssertion)

            let desktop = try #require(outcome.desktopError())
            #expect(desktop.side == .desktop)
            // The close may reach the desktop before or after it sent its request.
            #expect(["sending the request", "waiting for the phone's response"].contains(desktop.step))
            #expect(desktop.runtimeCode == .closed)
            #expect((desktop.underlying as? RuntimeError)?.closeCode == .goingAway)
            #expect("\(desktop)".contains("phone left"))

            let phone = try #require(outcome.phoneError())
            #expect(phone.step == "waiting for the desktop's request")
            #expect(phone.runtimeCode == .closed)
            #expect(outcome.elapsed < rig.timeouts.total)
            #expect(simulated.outcomes.isEmpty)
            #expect(await eventually { harness.relay.openTunnelCount == 0 })
        }
    }

    @Test("the phone falls silent after the handshake: the desktop ends at its user-action timeout")
    func phoneFallsSilent() async throws {
        try await withHarness { harness in
            let account = Account.make("alice")
            let simulated = SimulatedPhone(passkeys: [account.passkey])
            var rig = SessionRig(relayURL: harness.relayURL, phone: simulated)
            rig.timeouts.userAction = .seconds(1)
            // Out of network: whatever reaches the phone after handshake message 1 is lost.
            rig.phoneTransports = { transports in
                transports.wrappingTunnel { tunnel in
                    TunnelTap(tunnel, onReceive: { received, message in received == 1 ? message : nil })
                }
            }
            let outcome = try await rig.run(request: signInRequest(), hint: .getAssertion)

            let desktop = try #require(outcome.desktopError())
            #expect(desktop.side == .desktop)
            #expect(desktop.step == "waiting for the phone's response")
            #expect(desktop.runtimeCode == .timeout)
            // The desktop closed the tunnel when it gave up; the phone saw that.
            let phone = try #require(outcome.phoneError())
            #expect(phone.step == "waiting for the desktop's request")
            #expect(phone.runtimeCode == .closed)
            #expect(outcome.elapsed < rig.timeouts.total)
            #expect(simulated.outcomes.isEmpty)
            #expect(await eventually { harness.relay.openTunnelCount == 0 })
        }
    }

    @Test("the user denies on the phone: the ceremony fails with CTAP2_ERR_OPERATION_DENIED")
    func userDenies() async throws {
        try await withHarness { harness in
            let account = Account.make("alice")
            let phone = SimulatedPhone(passkeys: [account.passkey], policy: SoftwareAuthenticator.Policy(deny: true))
            let error = await #expect(throws: Ceremony.Failure.self) {
                try await harness.signIn(on: phone, relyingParty: exampleRP, knownCredentials: [account.credential])
            }
            #expect(error?.status == .operationDenied)
            #expect(phone.passkeys.first?.signCount == 0)
            guard case .refused(let status, _) = phone.outcomes.last else {
                Issue.record("the phone did not refuse: \(phone.outcomes)")
                return
            }
            #expect(status == .operationDenied)
        }
    }

    @Test("the phone has no passkey for the relying party: the ceremony fails with CTAP2_ERR_NO_CREDENTIALS")
    func noPasskey() async throws {
        try await withHarness { harness in
            let elsewhere = Account.make("alice", at: RelyingParty(id: "other.example", origin: "https://other.example"))
            let phone = SimulatedPhone(passkeys: [elsewhere.passkey])
            let error = await #expect(throws: Ceremony.Failure.self) {
                try await harness.signIn(on: phone, relyingParty: exampleRP, knownCredentials: [])
            }
            #expect(error?.status == .noCredentials)
            // The transport part ended normally: the relay saw both peers close.
            #expect(await eventually { harness.relay.openTunnelCount == 0 })
            #expect(harness.relay.statistics.tunnelsClosed[WebSocketCloseCode.normalClosure.rawValue] == 1)
        }
    }
}
