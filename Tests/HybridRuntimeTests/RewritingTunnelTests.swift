import CTAP2
import HybridCore
import HybridRuntime
import Synchronization
import Testing

/// `RewritingTunnel`, the public wrapper for tamper tests and transcripts (a library user had to
/// write one: the harness's own were internal).
@Suite("RewritingTunnel: see, change or drop each message of one end")
struct RewritingTunnelTests {
    static func signIn(
        wrapPhone: @escaping @Sendable (any TunnelTransport) -> any TunnelTransport = { $0 },
        wrapDesktop: @escaping @Sendable (any TunnelTransport) -> any TunnelTransport = { $0 },
        timeouts: SessionTimeouts = .fast
    ) async throws -> ClientDriver.Outcome {
        let account = Account.make("erin")
        let phone = SimulatedPhone(passkeys: [account.passkey])
        let authentication = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
        return try await HybridHarness.transactInMemory(
            request: authentication.requestBytes, hint: .getAssertion, phone: phone, timeouts: timeouts, wrapPhone: wrapPhone,
            wrapDesktop: wrapDesktop)
    }

    @Test("unchanged, it records both directions as the ends saw them: the desktop sends handshake, request, shutdown and receives handshake answer, post-handshake, update, response")
    func recordsBothDirections() async throws {
        let tap = Mutex<RewritingTunnel?>(nil)
        let outcome = try await Self.signIn(wrapDesktop: { base in
            let wrapped = RewritingTunnel(base)
            tap.withLock { $0 = wrapped }
            return wrapped
        })
        #expect(outcome.response.first == CTAP2StatusCode.ok.rawValue)
        let desktop = try #require(tap.withLock { $0 })
        #expect(desktop.sentMessages.count == 3 && desktop.sentMessages.first?.count == 81, "\(desktop.sentMessages.map(\.count))")
        #expect(desktop.receivedMessages.count == 4 && desktop.receivedMessages.first?.count == 81, "\(desktop.receivedMessages.map(\.count))")
    }

    @Test("a byte flipped in the post-handshake message the desktop receives is decryptionFailed on the desktop; one flipped in the request the phone receives, on the phone")
    func flippedBytes() async throws {
        let flip: RewritingTunnel.Rewrite = { number, message in
            guard number == 2 else { return message }
            var changed = message
            changed[changed.count / 2] ^= 0x01
            return changed
        }
        do {
            _ = try await Self.signIn(wrapDesktop: { RewritingTunnel($0, received: flip) })
            Issue.record("a tampered post-handshake message was accepted")
        } catch let error as TransactionError {
            #expect(error.side == .desktop && error.hybridCode == .decryptionFailed, "\(error)")
        }
        do {
            _ = try await Self.signIn(wrapPhone: { RewritingTunnel($0, received: flip) })
            Issue.record("a tampered request was accepted")
        } catch let error as TransactionError {
            #expect(error.side == .phone && error.hybridCode == .decryptionFailed, "\(error)")
        }
    }

    @Test("the last message dropped is waited for until the desktop gives up; one dropped in a run of encrypted messages makes the next fail to decrypt (its sequence number is taken)")
    func droppedMessages() async throws {
        // The desktop waits 2 s for the response, the phone 10 s for the desktop's shutdown after
        // it: with equal limits the phone could give up first, and the desktop see a closed tunnel.
        var timeouts = SessionTimeouts.fast
        timeouts.userAction = .seconds(2)
        timeouts.message = .seconds(10)
        do {
            _ = try await Self.signIn(
                wrapPhone: { RewritingTunnel($0, sent: { number, message in number == 4 ? nil : message }) }, timeouts: timeouts)
            Issue.record("a sign-in without its response succeeded")
        } catch let error as TransactionError {
            // The desktop gives up waiting; whichever side's report comes first: its timeout, or
            // the phone finding the tunnel closed after that failure (1011).
            let desktopTimedOut = error.side == .desktop && error.runtimeCode == .timeout
            let phoneSawTheFailure = error.side == .phone && error.closeCode == .internalError
            #expect(desktopTimedOut || phoneSawTheFailure, "\(error)")
        }
        do {
            _ = try await Self.signIn(wrapPhone: { RewritingTunnel($0, sent: { number, message in number == 2 ? nil : message }) })
            Issue.record("a sign-in without the post-handshake message succeeded")
        } catch let error as TransactionError {
            #expect(error.side == .desktop && error.hybridCode == .decryptionFailed, "\(error)")
        }
    }

    @Test("a verified in-memory registration and sign-in can be wrapped too: the phone's transcript of each, and the credentials verify")
    func verifiedCeremoniesWrapped() async throws {
        let phone = SimulatedPhone()
        let taps = Mutex<[RewritingTunnel]>([])
        let wrap: @Sendable (any TunnelTransport) -> any TunnelTransport = { base in
            let tap = RewritingTunnel(base)
            taps.withLock { $0.append(tap) }
            return tap
        }
        let registered = try await HybridHarness.registerInMemory(on: phone, relyingParty: exampleRP, userName: "zoe", wrapPhone: wrap)
        let signedIn = try await HybridHarness.signInInMemory(
            on: phone, relyingParty: exampleRP, knownCredentials: [registered], wrapPhone: wrap)
        #expect(signedIn.credentialId == registered.credentialId && signedIn.signCount == 1)
        let phoneEnds = taps.withLock { $0 }
        #expect(phoneEnds.count == 2)
        // The phone sends the handshake answer, the post-handshake and update messages and the response.
        #expect(phoneEnds.map { $0.sentMessages.count } == [4, 4], "\(phoneEnds.map { $0.sentMessages.map(\.count) })")
    }
}
