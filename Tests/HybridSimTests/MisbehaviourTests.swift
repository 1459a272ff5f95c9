import CTAP2
import Foundation
import HybridCore
import HybridSim
import Synchronization
import Testing

/// `phone --misbehave` and `desktop --misbehave`: one side breaks the protocol on purpose at one
/// step, and our other side (the correct peer) must end with the error Docs/FAULTS.md documents.
/// Both programs run in this process over real loopback sockets (an embedded relay on a free port).
@Suite("Misbehaving phone and desktop (in process)", .timeLimit(.minutes(2)))
struct MisbehaviourTests {
    /// The desktop's error when the phone failed to read handshake message 1 and closed the tunnel.
    static let phoneFailedInHandshake =
        "the tunnel was closed while waiting for the handshake response: 1011 (internal error): "
        + "the phone ended the transaction after an error (waiting for the desktop's handshake)"

    /// What both programs ended with.
    struct Ends {
        var desktop: Result<DesktopResult, ProgramFailure>
        var phone: Result<PhoneResult, ProgramFailure>
        var elapsed: Duration
        /// What the phone printed (standard output and error, in order).
        var phoneOutput: String
        /// What the desktop printed on standard error (its narration).
        var desktopNarration: [String] = []
        /// Whether the desktop's links file exists afterwards.
        var linksStored = false

        var desktopFailure: ProgramFailure? { if case .failure(let failure) = desktop { failure } else { nil } }
        var phoneFailure: ProgramFailure? { if case .failure(let failure) = phone { failure } else { nil } }
    }

    /// Runs a registration (mc) with the given misbehaviours; `timeout` is the desktop's, the
    /// phone's is longer so the desktop's verdict comes first when a timer must end it.
    private func run(
        phone misbehaviour: PhoneMisbehaviour? = nil, desktop desktopMisbehaviour: DesktopMisbehaviour? = nil,
        timeout: Duration = .seconds(10), link: Bool = false
    ) async throws -> Ends {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("misbehave-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: home) }
        var desktop = DesktopConfiguration()
        desktop.environment = ["HYBRID_SIM_HOME": home]
        desktop.relay = .embedded(port: 0)
        desktop.proximityPort = 0
        desktop.timeout = timeout
        desktop.request = .makeCredential
        desktop.misbehave = desktopMisbehaviour
        desktop.link = link
        let desktopLines = Mutex<[String]>([])
        let silent = ProgramOutput(standardOutput: { _ in }, standardError: { line in desktopLines.withLock { $0.append(line) } })
        let phoneLines = Mutex<[String]>([])
        let phoneOutput = ProgramOutput(
            standardOutput: { line in phoneLines.withLock { $0.append(line) } },
            standardError: { line in phoneLines.withLock { $0.append(line) } })
        let ready = AsyncStream<DesktopEndpoints>.makeStream()
        let start = ContinuousClock.now
        let configuration = desktop
        let desktopEnd = Task { () -> Result<DesktopResult, ProgramFailure> in
            do throws(ProgramFailure) {
                return .success(
                    try await DesktopProgram.run(configuration, output: silent) { endpoints in
                        ready.continuation.yield(endpoints)
                        ready.continuation.finish()
                    })
            } catch {
                ready.continuation.finish()
                return .failure(error)
            }
        }
        var endpoints: DesktopEndpoints?
        for await value in ready.stream { endpoints = value }
        let reached = try #require(endpoints)
        var phone = PhoneConfiguration(qr: .url(reached.url))
        phone.environment = ["HYBRID_SIM_HOME": home]
        phone.relayURL = reached.relayURL
        phone.proximityURL = reached.proximityURL
        phone.timeout = timeout + .seconds(3)
        phone.misbehave = misbehaviour
        let phoneConfiguration = phone
        let phoneEnd = Task { () -> Result<PhoneResult, ProgramFailure> in
            do throws(ProgramFailure) {
                return .success(try await PhoneProgram.run(phoneConfiguration, output: phoneOutput))
            } catch {
                return .failure(error)
            }
        }
        let (d, p) = (await desktopEnd.value, await phoneEnd.value)
        let links = FileManager.default.fileExists(atPath: home + "/links.json")
        return Ends(
            desktop: d, phone: p, elapsed: ContinuousClock.now - start,
            phoneOutput: phoneLines.withLock { $0.joined(separator: "\n") }, desktopNarration: desktopLines.withLock { $0 },
            linksStored: links)
    }

    // MARK: - A misbehaving phone, our desktop

    @Test("phone wrong-advert-key: the desktop ignores the advert as not ours and times out, exit 3")
    func wrongAdvertKey() async throws {
        // Long enough for the phone to be advertising even on a loaded machine.
        let ends = try await run(phone: .wrongAdvertKey, timeout: .seconds(5))
        let failure = try #require(ends.desktopFailure)
        #expect(failure.exitCode == 3)
        #expect(failure.message.hasPrefix("no nearby authenticator within 5 s:"), "\(failure)")
        #expect(failure.message.hasSuffix(" not for this QR code"), "\(failure)")
        #expect(!failure.message.contains("too far"), "every advert was refused by its key, not its RSSI")
        // Said when the first such advert came, not only at the timeout.
        #expect(ends.desktopNarration.contains {
            $0.hasPrefix("note: adverts are arriving that are not for this QR code (a phone that scanned an old capture or another desktop's code, or other traffic on the port")
        }, "\(ends.desktopNarration)")
        #expect(ends.phoneFailure != nil, "the phone loses its tunnel with the desktop's relay")
    }

    @Test("phone wrong-psk: the phone cannot read handshake message 1 and closes; the desktop reports the close, exit 6")
    func wrongPSK() async throws {
        let ends = try await run(phone: .wrongPSK)
        let failure = try #require(ends.desktopFailure)
        #expect(failure.exitCode == 6)
        // The phone closed with 1011 (not 1000): the desktop learns that it failed, and in which step.
        #expect(failure.message == Self.phoneFailedInHandshake, "\(failure)")
        let phone = try #require(ends.phoneFailure)
        #expect(phone.exitCode == 7)
        #expect(
            phone.message
                == "waiting for the desktop's handshake: handshakeFailed: handshake message does not authenticate (wrong PSK, key or transcript)",
            "\(phone)")
        #expect(ends.elapsed < .seconds(10), "ended by the close, not by a timer")
    }

    @Test("phone stale-routing-id: the desktop's join is refused with 404, exit 6")
    func staleRoutingID() async throws {
        let ends = try await run(phone: .staleRoutingID, timeout: .seconds(4))
        let failure = try #require(ends.desktopFailure)
        #expect(failure.exitCode == 6)
        #expect(
            failure.message == "joining the tunnel: relay rejected /cable/connect: 404 Not Found (unknown tunnel or routing ID)",
            "\(failure)")
    }

    @Test("phone bad-handshake: handshake message 2 does not authenticate at the desktop, exit 7")
    func phoneBadHandshake() async throws {
        let ends = try await run(phone: .badHandshake)
        let failure = try #require(ends.desktopFailure)
        #expect(failure.exitCode == 7)
        #expect(
            failure.message
                == "waiting for the handshake response: handshakeFailed: handshake message does not authenticate (wrong PSK, key or transcript)",
            "\(failure)")
        #expect(ends.phoneFailure?.exitCode == 6, "the phone sees the desktop close the tunnel")
    }

    @Test("phone wrong-ctap-status: the desktop treats CTAP1_ERR_OTHER as a refusal and ignores the body, exit 4")
    func wrongStatus() async throws {
        let ends = try await run(phone: .wrongCTAPStatus)
        let failure = try #require(ends.desktopFailure)
        #expect(failure.exitCode == 4)
        #expect(failure.message == "the phone refused the makeCredential request: CTAP1_ERR_OTHER", "\(failure)")
        #expect(throws: Never.self, "the phone thinks it answered") { try ends.phone.get() }
    }

    @Test("phone truncated-response: the desktop cannot parse the response, exit 7")
    func truncatedResponse() async throws {
        let ends = try await run(phone: .truncatedResponse)
        let failure = try #require(ends.desktopFailure)
        #expect(failure.exitCode == 7)
        #expect(
            failure.message.hasPrefix(
                "the phone's makeCredential response is malformed: CTAP2 invalidCBOR: CTAP2 response payload: CBOR: input ends inside an item"
            ), "\(failure)")
        #expect(throws: Never.self, "the phone thinks it answered") { try ends.phone.get() }
    }

    @Test("phone bad-post-handshake: a post-handshake message that decrypts but is not its CBOR map, exit 7")
    func badPostHandshake() async throws {
        let ends = try await run(phone: .badPostHandshake)
        let failure = try #require(ends.desktopFailure)
        #expect(failure.exitCode == 7)
        #expect(
            failure.message
                == "waiting for the post-handshake message: invalidPostHandshakeMessage: its CBOR map is cut short (CBOR: input ends inside an item at offset 0): a padding count too large would do this",
            "\(failure)")
    }

    @Test("phone bad-linking-signature (desktop --link): the desktop refuses the linking information, stores no link, exit 7")
    func badLinkingSignature() async throws {
        let ends = try await run(phone: .badLinkingSignature, link: true)
        let failure = try #require(ends.desktopFailure)
        #expect(failure.exitCode == 7)
        #expect(failure.message == "reading the phone's response: invalidLinkingInfo: handshake signature does not verify", "\(failure)")
        #expect(!ends.linksStored, "no link was stored")
    }

    @Test("control: desktop --link with a correct phone stores the link (what bad-linking-signature prevents)")
    func linkControl() async throws {
        let ends = try await run(link: true)
        #expect(throws: Never.self) { try ends.desktop.get() }
        #expect(ends.linksStored)
    }

    @Test("phone bad-linking-signature without --link: there is no linking information to break, the registration succeeds")
    func badLinkingSignatureWithoutLink() async throws {
        let ends = try await run(phone: .badLinkingSignature)
        #expect(throws: Never.self) { try ends.desktop.get() }
        #expect(throws: Never.self) { try ends.phone.get() }
    }

    // MARK: - A misbehaving desktop, our phone

    @Test("desktop bad-handshake: handshake message 1 does not authenticate at the phone, exit 7")
    func desktopBadHandshake() async throws {
        let ends = try await run(desktop: .badHandshake)
        let phone = try #require(ends.phoneFailure)
        #expect(phone.exitCode == 7)
        #expect(
            phone.message
                == "waiting for the desktop's handshake: handshakeFailed: handshake message does not authenticate (wrong PSK, key or transcript)",
            "\(phone)")
        #expect(
            ends.desktopFailure?.message == Self.phoneFailedInHandshake)
    }

    @Test("desktop bad-ctap-request: the phone answers CTAP2_ERR_INVALID_CBOR")
    func badRequest() async throws {
        let ends = try await run(desktop: .badCTAPRequest)
        let desktop = try #require(ends.desktopFailure)
        #expect(desktop.exitCode == 4)
        #expect(desktop.message == "the phone refused the makeCredential request: CTAP2_ERR_INVALID_CBOR", "\(desktop)")
        let phone = try #require(ends.phoneFailure)
        #expect(phone.exitCode == 4)
        #expect(phone.message.hasPrefix("refused the CTAP2 request: malformed request: CTAP2 invalidCBOR: MakeCredentialRequest: CBOR:"), "\(phone)")
        #expect(phone.message.hasSuffix("; answered CTAP2_ERR_INVALID_CBOR"), "\(phone)")
    }

    @Test("desktop no-shutdown: the phone had answered, so the close ends its transaction normally; both exit 0")
    func noShutdown() async throws {
        let ends = try await run(desktop: .noShutdown)
        #expect(throws: Never.self) { try ends.desktop.get() }
        #expect(throws: Never.self) { try ends.phone.get() }
        // The shutdown really was left out: the phone saw the close instead.
        #expect(ends.phoneOutput.contains("sent no shutdown message after the response"), "\(ends.phoneOutput)")
    }
}
