import CTAP2
import Foundation
import HybridCore
import HybridRuntime
import Testing

/// Every `--fault` mode of the relay against our own desktop and phone (``ClientDriver`` and
/// ``AuthenticatorDriver`` over loopback): each ends with the error Docs/FAULTS.md documents, on the
/// side that must notice it.
///
/// Message numbers in the QR flow: to the phone #1 handshake message 1, #2 the CTAP request, #3 the
/// shutdown; to the desktop #1 handshake message 2, #2 the post-handshake message, #3 the update
/// message, #4 the CTAP response.
@Suite("Faults: relay --fault modes", .timeLimit(.minutes(2)))
struct RelayFaultModeTests {
    /// One fault and the error it must produce.
    struct Case: Sendable, CustomTestStringConvertible {
        var fault: String
        /// The side that must report the fault.
        var side: TransactionError.Side
        var step: String
        /// Another step the failing side may be at when the fault lands, when the timing decides
        /// (the phone may still be sending its post-handshake message when a close arrives).
        var orStep: String? = nil
        var hybrid: HybridError.Code? = nil
        var runtime: RuntimeError.Code? = nil
        /// Part of the error's text.
        var text: String
        /// The close code the failing side got, for `close`.
        var closeCode: UInt16? = nil
        /// A short message timeout (the fault is noticed by a timer).
        var shortTimeout = false
        /// The other side may finish normally: the fault is noticed after the request went out, and a
        /// phone that already answered takes the desktop's normal close as the end of the transaction.
        var otherMaySucceed = false

        var testDescription: String { fault }
    }

    static let cases: [Case] = [
        Case(
            fault: "corrupt@to-phone#1", side: .phone, step: "waiting for the desktop's handshake", hybrid: .handshakeFailed,
            text: "handshake"),
        Case(
            fault: "corrupt@to-desktop#2", side: .desktop, step: "waiting for the post-handshake message",
            hybrid: .decryptionFailed, text: "does not authenticate (tampered, reordered or wrong key)"),
        Case(
            fault: "truncate@to-desktop#1", side: .desktop, step: "waiting for the handshake response",
            hybrid: .handshakeFailed, text: "handshake response is 40 bytes, expected 81"),
        Case(
            fault: "truncate=10@to-phone#2", side: .phone, step: "waiting for the desktop's request",
            hybrid: .decryptionFailed, text: "message of 10 bytes is shorter than one padded block and a tag"),
        Case(
            fault: "duplicate@to-desktop#2", side: .desktop, step: "reading the phone's response",
            hybrid: .decryptionFailed, text: "message 1 does not authenticate", otherMaySucceed: true),
        // A long hold: the update message overtakes however slowly a loaded machine sends it.
        Case(
            fault: "reorder=5s@to-desktop#2", side: .desktop, step: "waiting for the post-handshake message",
            hybrid: .decryptionFailed, text: "message 0 does not authenticate"),
        // Message 2 dropped: the next message (post-handshake, 144 bytes) is taken for it.
        Case(
            fault: "drop@to-desktop#1", side: .desktop, step: "waiting for the handshake response",
            hybrid: .handshakeFailed, text: "handshake response is 144 bytes, expected 81"),
        // Everything to the desktop dropped: only its timer ends the wait.
        Case(
            fault: "drop@to-desktop", side: .desktop, step: "waiting for the handshake response", runtime: .timeout,
            text: "waiting for the handshake response", shortTimeout: true),
        Case(
            fault: "close=4000@to-desktop#1", side: .desktop, step: "waiting for the handshake response", runtime: .closed,
            text: "fault injection: close", closeCode: 4000),
        Case(
            fault: "close@to-phone#2", side: .phone, step: "waiting for the desktop's request",
            orStep: "sending to the desktop", runtime: .closed,
            text: "fault injection: close", closeCode: 1011),
    ]

    @Test("each fault mode ends the transaction with its documented error on the side that must notice", arguments: cases)
    func mode(_ fault: Case) async throws {
        var configuration = RelayConfiguration()
        configuration.faults = try RelayFaults(parsing: [fault.fault], seed: 1)
        try await withHarness(configuration) { harness in
            let account = Account.make("alice")
            var rig = SessionRig(relayURL: harness.relayURL, phone: SimulatedPhone(passkeys: [account.passkey]))
            if fault.shortTimeout {
                // The desktop's timer must end it: the phone's wait starts a relay hop later, but
                // on a loaded machine two timers that close are run in either order.
                rig.phoneTimeouts = rig.timeouts
                rig.timeouts.message = .milliseconds(1500)
            }
            let outcome = try await rig.run(request: signInRequest(), hint: .getAssertion)

            let error = try #require(fault.side == .desktop ? outcome.desktopError() : outcome.phoneError())
            #expect(error.side == fault.side)
            #expect(error.step == fault.step || error.step == fault.orStep, "\(error)")
            if let code = fault.hybrid { #expect(error.hybridCode == code, "\(error)") }
            if let code = fault.runtime { #expect(error.runtimeCode == code, "\(error)") }
            #expect("\(error)".contains(fault.text), "\(error)")
            if let code = fault.closeCode {
                #expect((error.underlying as? RuntimeError)?.closeCode?.rawValue == code, "\(error)")
            }
            // The other side fails too: the tunnel was closed under it (or, after a drop, its own wait ran out).
            let otherResult = fault.side == .desktop ? outcome.phone : outcome.desktop.map { _ in () }
            if !(fault.otherMaySucceed && (try? otherResult.get()) != nil) {
                let other = fault.side == .desktop ? outcome.phoneError() : outcome.desktopError()
                let allowed: Set<RuntimeError.Code> = fault.shortTimeout ? [.closed, .timeout] : [.closed]
                #expect(other?.runtimeCode.map(allowed.contains) == true, "\(other.map { "\($0)" } ?? "none")")
            }
            #expect(outcome.elapsed < rig.timeouts.total)
            #expect(await eventually { harness.relay.openTunnelCount == 0 })
        }
    }

    @Test("delay below the timeouts: the sign-in succeeds, later by at least the delays on its critical path")
    func delaySucceeds() async throws {
        var configuration = RelayConfiguration()
        configuration.faults = try RelayFaults(parsing: ["delay=250ms"])
        try await withHarness(configuration) { harness in
            let account = Account.make("alice")
            let rig = SessionRig(relayURL: harness.relayURL, phone: SimulatedPhone(passkeys: [account.passkey]))
            let outcome = try await rig.run(request: signInRequest(), hint: .getAssertion)
            let signedIn = try outcome.desktop.get()
            #expect(signedIn.response.first == CTAP2StatusCode.ok.rawValue)
            #expect(throws: Never.self) { try outcome.phone.get() }
            // Handshake 1, handshake 2, request and response each waited 250 ms, one after the other.
            #expect(outcome.elapsed >= .milliseconds(1000))
        }
    }

    @Test("delay on some messages only: later messages wait behind a delayed one, so order holds and the sign-in succeeds")
    func partialDelayKeepsOrder() async throws {
        let faults = try RelayFaults(parsing: ["delay=300ms:0.5@to-desktop"])
        // A seed whose decisions delay one of the phone's first messages and not the next one.
        let seed = try #require(
            (UInt64(0)..<1000).first { seed in
                let delayed = (1...4).map { faults.decide(seed: seed, recipient: .desktop, number: $0, length: 100).delay != nil }
                return delayed[0] && !delayed[1] && delayed[2] && !delayed[3]
            })
        var configuration = RelayConfiguration()
        configuration.faults = RelayFaults(faults.rules, seed: seed)
        try await withHarness(configuration) { harness in
            let account = Account.make("alice")
            let rig = SessionRig(relayURL: harness.relayURL, phone: SimulatedPhone(passkeys: [account.passkey]))
            let outcome = try await rig.run(request: signInRequest(), hint: .getAssertion)
            #expect(throws: Never.self) { try outcome.desktop.get() }
            #expect(throws: Never.self) { try outcome.phone.get() }
            #expect(outcome.elapsed >= .milliseconds(300))
        }
    }

    @Test("reorder with nothing to overtake: the held message goes after the hold and the sign-in succeeds")
    func reorderReleasedAfterHold() async throws {
        var configuration = RelayConfiguration()
        // Handshake message 1: the desktop sends nothing else until it has message 2.
        configuration.faults = try RelayFaults(parsing: ["reorder=300ms@to-phone#1"])
        try await withHarness(configuration) { harness in
            let account = Account.make("alice")
            let rig = SessionRig(relayURL: harness.relayURL, phone: SimulatedPhone(passkeys: [account.passkey]))
            let outcome = try await rig.run(request: signInRequest(), hint: .getAssertion)
            #expect(throws: Never.self) { try outcome.desktop.get() }
            #expect(throws: Never.self) { try outcome.phone.get() }
            #expect(outcome.elapsed >= .milliseconds(300))
        }
    }

    @Test("a peer's close frame waits behind its delayed last message: the phone reads the shutdown, not just the close")
    func closeWaitsBehindDelay() async throws {
        var configuration = RelayConfiguration()
        configuration.faults = try RelayFaults(parsing: ["delay=300ms@to-phone#3"])
        try await withHarness(configuration) { harness in
            let account = Account.make("alice")
            var rig = SessionRig(relayURL: harness.relayURL, phone: SimulatedPhone(passkeys: [account.passkey]))
            let events = LockedBox<[SessionEvent]>([])
            rig.events = { event in events.update { $0.append(event) } }
            let outcome = try await rig.run(request: signInRequest(), hint: .getAssertion)
            #expect(throws: Never.self) { try outcome.desktop.get() }
            #expect(throws: Never.self) { try outcome.phone.get() }
            #expect(events.value.contains { if case .shutdownReceived = $0 { true } else { false } })
            #expect(!events.value.contains { if case .closedAfterResponse = $0 { true } else { false } })
        }
    }

    @Test("faults hit the bytes the relay forwards: the message observer and --record see the truncated message")
    func recordedAsForwarded() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("faults-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = RelayConfiguration()
        configuration.faults = try RelayFaults(parsing: ["truncate=10@to-phone#2"])
        configuration.recordDirectory = directory
        let observed = LockedBox<[(RelayDirection, Int)]>([])
        configuration.messageObserver = { direction, bytes in observed.update { $0.append((direction, bytes.count)) } }
        try await withHarness(configuration) { harness in
            let account = Account.make("alice")
            let rig = SessionRig(relayURL: harness.relayURL, phone: SimulatedPhone(passkeys: [account.passkey]))
            _ = try await rig.run(request: signInRequest(), hint: .getAssertion)
            #expect(await eventually { harness.relay.openTunnelCount == 0 })
        }
        let toPhone = observed.value.filter { $0.0 == .joinerToCreator }.map(\.1)
        #expect(toPhone == [81, 10], "handshake message 1, then the request cut to 10 bytes")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory)
        let file = try #require(files.first { $0.hasSuffix(".hsrec") })
        let recording = try TunnelRecording(decoding: Array(try Data(contentsOf: URL(fileURLWithPath: directory + "/" + file))))
        let recorded = recording.entries.compactMap { entry -> Int? in
            if case .message(.joinerToCreator, let bytes) = entry.event { return bytes.count }
            return nil
        }
        #expect(recorded == [81, 10])
    }

    @Test("directions follow the phone and the desktop in the linked flow too (the desktop creates that tunnel)")
    func linkedDirections() async throws {
        let phone = LinkedPhone(name: "Pixel")
        let (credential, link) = try await withHarness { harness in
            try await harness.registerAndLink(on: phone, relyingParty: exampleRP, userName: "alice")
        }
        var configuration = RelayConfiguration()
        configuration.faults = try RelayFaults(parsing: ["drop@to-desktop"])
        configuration.contactWait = .seconds(2)
        let observed = LockedBox<[RelayDirection]>([])
        configuration.messageObserver = { direction, _ in observed.update { $0.append(direction) } }
        try await withHarness(configuration) { harness in
            var options = HybridHarness.TransactionOptions()
            options.timeouts = SessionTimeouts(
                advert: .seconds(5), connect: .seconds(5), handshake: .seconds(2), message: .milliseconds(1500),
                userAction: .seconds(2))
            await #expect(throws: (any Error).self) {
                try await harness.signInLinked(
                    on: phone, link: link, relyingParty: exampleRP, knownCredentials: [credential], options: options)
            }
            // The desktop (creator) sent handshake message 1 to the phone; nothing reached the desktop.
            #expect(observed.value.contains(.creatorToJoiner))
            #expect(!observed.value.contains(.joinerToCreator))
        }
    }
}
