import CTAP2
import HybridCore
@testable import HybridSim
import Synchronization
import Testing

/// What the desktop checks as the browser would, before the relying party sees the answer.
@Suite("Desktop: the browser's reading of the phone's answer")
struct DesktopBrowserChecksTests {
    /// Chromium reads a new credential's COSE key with its canonical CBOR reader: the registration
    /// fails in Chrome when the key's map keys are out of order, so it fails here (exit 7).
    @Test("a registration whose COSE key has its map keys out of order is a protocol error (exit 7), before the relying party; in order it verifies")
    func unsortedCOSEKey() throws {
        var configuration = DesktopConfiguration()
        configuration.request = .makeCredential
        configuration.environment = [:]
        let store = RelyingPartyStore(path: "/nonexistent/rp-credentials.json", credentials: [])
        let ceremony = try DesktopCeremony(configuration: configuration, store: store, challenge: [UInt8](repeating: 5, count: 32))
        var authenticator = SoftwareAuthenticator(random: .deterministic(seed: Array("desktop cose".utf8)))
        let (bytes, _) = authenticator.handle(ceremony.requestBytes, policy: .init(), now: 0)
        var scratch = store
        _ = try ceremony.finish(response: bytes, store: &scratch, now: 0)

        let response = try MakeCredentialResponse(bytes: Array(bytes.dropFirst()))
        let key = try #require(response.authData.attestedCredentialData?.credentialPublicKey)
        #expect(Array(key.prefix(5)) == [0xA5, 0x01, 0x02, 0x03, 0x26])
        let authData = response.authData.bytes
        let start = authData.count - key.count
        var map = try #require(CBOR.decode(Array(bytes.dropFirst())).mapValue)
        map[2] = .bytes(Array(authData[..<start]) + [0xA5, 0x03, 0x26, 0x01, 0x02] + key.dropFirst(5))
        var untouched = store
        #expect {
            try ceremony.finish(response: [0x00] + CBOR.encode(.map(map)), store: &untouched, now: 0)
        } throws: { error in
            guard let failure = error as? ProgramFailure else { return false }
            return failure.exitCode == 7
                && failure.message.hasPrefix("the phone's makeCredential response is malformed: the credential public key in its authenticator data is not CTAP2 canonical CBOR")
        }
        #expect(untouched.credentials.isEmpty)
    }

    /// Okta's options wrapper with a `user.id` that parses as base64url: read that way (never
    /// guessed), but the note points at `--user-id-encoding utf8`, which Okta's own sample uses;
    /// not when the encoding was chosen.
    @Test("Okta's {\"options\": …} registration read with the default user.id encoding gets a note pointing at --user-id-encoding utf8; a chosen encoding gets none")
    func oktaUserIDNote() throws {
        let document = DesktopCeremony.OptionsDocument(bytes: try OptionsFixtures.bytes("okta-registration-options.json"), source: "okta.json")
        for (encoding, noted) in [(nil, true), (UserIdEncoding.utf8, false), (.base64url, false)] as [(UserIdEncoding?, Bool)] {
            var configuration = DesktopConfiguration()
            configuration.request = .makeCredential
            configuration.environment = [:]
            configuration.userIdEncoding = encoding
            let store = RelyingPartyStore(path: "/nonexistent/rp-credentials.json", credentials: [])
            let ceremony = try DesktopCeremony(
                configuration: configuration, store: store, challenge: [UInt8](repeating: 5, count: 32), document: document)
            let lines = Mutex<[String]>([])
            let narrator = DesktopNarrator(
                output: ProgramOutput(standardOutput: { _ in }, standardError: { line in lines.withLock { $0.append(line) } }), json: false)
            DesktopRelyingPartyLink.describeShape(of: ceremony, userIdEncodingGiven: encoding != nil, narrator: narrator)
            let said = lines.withLock { $0 }
            let note = said.first { $0.contains("is Okta's shape; user.id was read as base64url") }
            #expect((note != nil) == noted, "\(String(describing: encoding)): \(said)")
            if let note { #expect(note.hasSuffix("give --user-id-encoding utf8 to do the same"), "\(note)") }
        }
    }

    /// CTAP 2.2 §6.2.2: a getAssertion response may leave out its credential only when the request
    /// allowed exactly one. Otherwise the browser fails it (exit 7), and the message says the rule.
    @Test("an assertion without its credential: the one allowed credential is reported; with several allowed, or none, exit 7 naming the rule")
    func assertionWithoutCredential() throws {
        var authenticator = SoftwareAuthenticator(random: .deterministic(seed: Array("desktop no credential".utf8)))
        var store = RelyingPartyStore(path: "/nonexistent/rp-credentials.json", credentials: [])
        var registration = DesktopConfiguration()
        registration.request = .makeCredential
        registration.userName = "alice"
        registration.environment = [:]
        for _ in 0..<2 {
            let ceremony = try DesktopCeremony(configuration: registration, store: store, challenge: [UInt8](repeating: 5, count: 32))
            let (bytes, _) = authenticator.handle(ceremony.requestBytes, policy: .init(), now: 0)
            _ = try ceremony.finish(response: bytes, store: &store, now: 0)
        }
        #expect(store.credentials.count == 2)

        // The store's two credentials for alice (username-first; the phone holds the second, which
        // replaced the first), the phone's alone, none (discoverable).
        for (user, keep, expected) in [
            ("alice", 2, " (a phone may leave it out only when the request allows exactly one credential; it allowed 2)"),
            ("alice", 1, nil),
            (nil, 2, " (a phone may leave it out only when the request allows exactly one credential; this was a discoverable sign-in)"),
        ] as [(String?, Int, String?)] {
            var signIn = DesktopConfiguration()
            signIn.request = .getAssertion
            signIn.userName = user
            signIn.environment = [:]
            var scoped = store
            if keep == 1 { scoped.credentials.removeFirst() }  // the record of the passkey the phone replaced
            let ceremony = try DesktopCeremony(configuration: signIn, store: scoped, challenge: [UInt8](repeating: 6, count: 32))
            var phone = authenticator
            var policy = SoftwareAuthenticator.Policy()
            policy.selectAccount = { candidates in candidates.first }  // two of alice's match: take one
            let (bytes, _) = phone.handle(ceremony.requestBytes, policy: policy, now: 0)
            #expect(bytes.first == 0x00, "the phone signed")
            var map = try #require(CBOR.decode(Array(bytes.dropFirst())).mapValue)
            #expect(map[1] != nil)
            map[1] = nil
            var scratch = scoped
            if let expected {
                #expect {
                    try ceremony.finish(response: [0x00] + CBOR.encode(.map(map)), store: &scratch, now: 0)
                } throws: { error in
                    guard let failure = error as? ProgramFailure else { return false }
                    return failure.exitCode == 7
                        && failure.message == "the phone's assertion is unusable: credential mismatch: the assertion names no credential" + expected
                }
            } else {
                let result = try ceremony.finish(response: [0x00] + CBOR.encode(.map(map)), store: &scratch, now: 0)
                #expect(result.credentialId == scoped.credentials[0].credentialId)
            }
        }
    }
}
