import CTAP2
import HybridCore
import HybridRuntime
import Synchronization
import Testing

/// The public in-memory QR harness (``HybridHarness/transactInMemory(request:hint:phone:timeouts:events:wrapPhone:wrapDesktop:seed:linking:)``):
/// the drivers and state machines of a loopback transaction with no socket at all.
@Suite("In-memory harness: QR transactions without sockets")
struct InMemoryHarnessTests {
    private let relyingParty = RelyingParty(id: "memory.example", origin: "https://memory.example")

    @Test("registration and two sign-ins, verified as the relying party; each side's events in protocol order")
    func registerAndSignIn() async throws {
        let phone = SimulatedPhone()
        let registered = try await HybridHarness.registerInMemory(on: phone, relyingParty: relyingParty, userName: "mem")
        var credential = registered
        for _ in 0..<2 {
            credential = try await HybridHarness.signInInMemory(
                on: phone, relyingParty: relyingParty, knownCredentials: [credential])
        }
        #expect(credential.signCount == registered.signCount + 2)

        let events = Mutex<[String]>([])
        let ceremony = Ceremony.Authentication(relyingParty: relyingParty, challenge: Array(repeating: 7, count: 32))
        let outcome = try await HybridHarness.transactInMemory(
            request: ceremony.requestBytes, hint: .getAssertion, phone: phone,
            events: { event in events.withLock { $0.append(eventName(event)) } })
        #expect(try ceremony.verify(response: outcome.response, knownCredentials: [credential]).credential.signCount
            == credential.signCount + 1)
        // Each side reports its own events in order; across the sides the recorded order may
        // interleave (a side reports a send once it returned, the peer may have read it already).
        let seen = events.withLock { $0 }
        let desktop = ["advertAccepted", "tunnelJoined", "handshakeSent", "authenticatorReady", "requestSent", "responseReceived", "shutdownSent"]
        let phoneSide = ["tunnelCreated", "advertising", "handshakeAnswered", "requestReceived", "responseSent", "shutdownReceived"]
        for expected in [desktop, phoneSide] {
            #expect(seen.filter(expected.contains) == expected, "\(seen)")
        }
    }

    @Test("seeded: a registration's every message is the same on every run; another seed changes them; a sign-in differs only in its signed response")
    func seededTranscripts() async throws {
        let user = PublicKeyCredentialUserEntity(id: [1, 2, 3, 4], name: "seed", displayName: "Seed")
        let registration = Ceremony.Registration(
            relyingParty: relyingParty, rpName: nil, user: user, challenge: Array(repeating: 3, count: 32))
        let getAssertion = Ceremony.Authentication(relyingParty: relyingParty, challenge: Array(repeating: 4, count: 32))
        /// Both sides' messages of a registration then a sign-in on a phone seeded with `seed` too.
        func run(_ seed: [UInt8]) async throws -> (registration: [[UInt8]], signIn: [[UInt8]]) {
            let phone = SimulatedPhone(random: .deterministic(seed: seed + [0xFF]))
            var transcripts: [[[UInt8]]] = []
            for (request, hint) in [(registration.requestBytes, QRPayload.RequestType.makeCredential), (getAssertion.requestBytes, .getAssertion)] {
                let (phoneSent, desktopSent) = (Recorder(), Recorder())
                _ = try await HybridHarness.transactInMemory(
                    request: request, hint: hint, phone: phone,
                    wrapPhone: { RecordingTunnel($0, sent: phoneSent) }, wrapDesktop: { RecordingTunnel($0, sent: desktopSent) },
                    seed: seed)
                transcripts.append(desktopSent.messages + [[]] + phoneSent.messages)
            }
            return (transcripts[0], transcripts[1])
        }
        let first = try await run(Array("seed one".utf8))
        let again = try await run(Array("seed one".utf8))
        let other = try await run(Array("seed two".utf8))
        #expect(first.registration.count >= 5, "\(first.registration.count) messages")
        #expect(first.registration == again.registration, "the same seed gave another registration transcript")
        #expect(first.registration != other.registration)
        // The phone's last message, its response, carries the assertion's ECDSA signature, which
        // swift-crypto randomizes; everything else repeats.
        let responseIndex = first.signIn.count - 1
        #expect(first.signIn.count == again.signIn.count && first.signIn[responseIndex] != again.signIn[responseIndex])
        for (index, message) in first.signIn.enumerated() where index != responseIndex {
            #expect(message == again.signIn[index], "sign-in message \(index) differs between runs of the same seed")
        }
    }

    @Test("a bit flipped in the handshake response on the desktop's end: the desktop fails with handshakeFailed")
    func tamperedHandshake() async throws {
        let phone = SimulatedPhone()
        let ceremony = Ceremony.Authentication(relyingParty: relyingParty, challenge: Array(repeating: 1, count: 32))
        let error = await #expect(throws: TransactionError.self) {
            _ = try await HybridHarness.transactInMemory(
                request: ceremony.requestBytes, hint: .getAssertion, phone: phone,
                wrapDesktop: { end in
                    TunnelTap(
                        end,
                        onReceive: { received, message in
                            guard received == 1 else { return message }
                            var flipped = message
                            flipped[flipped.count - 1] ^= 0x01
                            return flipped
                        })
                })
        }
        #expect(error?.side == .desktop)
        #expect(error?.hybridCode == .handshakeFailed, "\(String(describing: error))")
    }
}
