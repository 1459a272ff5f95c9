import CTAP2
import Foundation
import HybridCore
@testable import HybridSim
import Synchronization
import Testing

/// `hybrid-sim rp`'s relying party in process (no sockets) and profile files.
@Suite("Relying-party server: requests, challenges and profiles")
struct RelyingPartyServiceTests {
    private func service(
        _ profile: String, directory: TemporaryDirectory, now: (@Sendable () -> UInt64)? = nil
    ) throws -> RelyingPartyService {
        let profile = try RelyingPartyProfile.load(profile)
        let relyingParty = RelyingParty(id: "example.com", origin: "https://example.com")
        let store = RelyingPartyStore(path: directory.path + "/store.json")
        guard let now else { return RelyingPartyService(profile: profile, relyingParty: relyingParty, store: store) }
        return RelyingPartyService(profile: profile, relyingParty: relyingParty, store: store, now: now)
    }

    /// A sign-in result for `challenge` (base64url) whose authenticator data is malformed: it gets
    /// as far as the challenge lookup and then fails.
    private static func malformedSignIn(challenge: String) -> [UInt8] {
        let clientData = Base64URL.encode(Array(#"{"type":"webauthn.get","challenge":"\#(challenge)","origin":"https://example.com"}"#.utf8))
        return Array(#"{"id":"AQ","rawId":"AQ","type":"public-key","response":{"clientDataJSON":"\#(clientData)","authenticatorData":"AA","signature":"AA"}}"#.utf8)
    }

    @Test("each built-in profile's options come in its shape, with a fresh 32-byte challenge")
    func optionsShapes() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        for name in RelyingPartyProfile.builtInNames {
            let profile = try RelyingPartyProfile.load(name)
            let rp = try service(name, directory: directory)
            let endpoint = try #require(profile.registration?.options)
            let target = endpoint.path.replacingOccurrences(of: "{user}", with: "zoe")
            let body = endpoint.body.map { Array(((try? $0.substituting(["user": .string("zoe")])) ?? .null).data) } ?? []
            let headers = Dictionary(uniqueKeysWithValues: (profile.headers ?? [:]).map { ($0.key, "x") })
            let response = await rp.handle(
                RelyingPartyHTTPRequest(method: endpoint.method, target: target, headers: headers, body: body))
            #expect(response.status == 200, "\(name): \(response.body.text)")
            let document = Array(response.body.data)
            let parsed = try PublicKeyCredentialCreationOptionsJSON.parse(
                document: document, userIdEncoding: profile.userIdEncoding ?? .base64url)
            #expect(parsed.shape == profile.optionsShape ?? .bare, "\(name)")
            #expect(parsed.options.challenge.bytes.count == 32)
            #expect(parsed.options.rp.id == "example.com")
            let takesUser = endpoint.path.contains("{user}") || endpoint.body?.text.contains("{user}") == true
            #expect(parsed.options.user.name == (takesUser ? "zoe" : "alice"), "\(name)")
            #expect(response.headers.contains { $0.0 == "Set-Cookie" } == (profile.cookies == true), "\(name)")
        }
    }

    @Test("okta's expiresAt is its challenge's expiry (issued + 5 minutes), not a fixed date")
    func oktaExpiresAt() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let okta = try service("okta", directory: directory, now: { 1_764_162_000 })
        let response = await okta.handle(RelyingPartyHTTPRequest(
            method: "POST", target: "/idp/myaccount/webauthn/registration",
            headers: ["Accept": "application/json; okta-version=1.0.0", "Authorization": "Bearer x"]))
        #expect(response.status == 200, "\(response.body.text)")
        #expect(response.body["expiresAt"]?.stringValue == "2025-11-26T13:05:00.000Z", "\(response.body.text)")
        #expect(response.body["options"]?["challenge"]?.stringValue != nil)
        // Only the exact placeholder is replaced; other text in braces in a profile's extras stays.
        let extras = JSONValue.object(["expiresAt": .string("{expiresAt}"), "note": .string("{not a placeholder}"), "list": .array([.string("{expiresAt}")])])
        let replaced = RelyingPartyService.replacing("{expiresAt}", with: .string("T"), in: extras)
        #expect(replaced == .object(["expiresAt": .string("T"), "note": .string("{not a placeholder}"), "list": .array([.string("T")])]))
    }

    @Test("a missing profile header is 401, an unknown endpoint 404, a known path with another method 405 with Allow")
    func headersAndRoutes() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let okta = try service("okta", directory: directory)
        let unauthorized = await okta.handle(
            RelyingPartyHTTPRequest(method: "POST", target: "/idp/myaccount/webauthn/registration", headers: ["Accept": "application/json"]))
        #expect(unauthorized.status == 401)
        #expect(unauthorized.body["error"]?.stringValue?.contains("Authorization") == true)
        let hanko = try service("hanko", directory: directory)
        let missing = await hanko.handle(RelyingPartyHTTPRequest(method: "GET", target: "/nowhere"))
        #expect(missing.status == 404)
        let wrongMethod = await hanko.handle(RelyingPartyHTTPRequest(method: "POST", target: "/registration_initialize"))
        #expect(wrongMethod.status == 405, "\(wrongMethod.body.text)")
        #expect(wrongMethod.headers.contains { $0.0 == "Allow" && $0.1 == "GET" })
    }

    @Test("a challenge is used once: a second result for it is refused as already used")
    func singleUseChallenge() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let rp = try service("hanko", directory: directory)
        let options = await rp.handle(RelyingPartyHTTPRequest(method: "GET", target: "/authentication_initialize"))
        let challenge = try #require(options.body["publicKey"]?["challenge"]?.stringValue)
        let body = Self.malformedSignIn(challenge: challenge)
        let first = await rp.handle(RelyingPartyHTTPRequest(method: "POST", target: "/authentication_finalize", body: body))
        #expect(first.status == 400, "\(first.body.text)")  // malformed authenticator data
        let second = await rp.handle(RelyingPartyHTTPRequest(method: "POST", target: "/authentication_finalize", body: body))
        #expect(second.status == 401)
        #expect(second.body["error"]?.stringValue?.contains("was already used: a result was posted with it before") == true, "\(second.body.text)")
        // A challenge this server never issued is unknown, not "used".
        let never = await rp.handle(RelyingPartyHTTPRequest(
            method: "POST", target: "/authentication_finalize", body: Self.malformedSignIn(challenge: Base64URL.encode([UInt8](repeating: 9, count: 32)))))
        #expect(never.body["error"]?.stringValue?.hasPrefix("unknown challenge ") == true, "\(never.body.text)")
    }

    @Test("a result without the session cookie a profile set, or without its credential member, is told exactly that")
    func missingCookieAndCredential() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let simple = try service("simplewebauthn", directory: directory)
        let options = await simple.handle(RelyingPartyHTTPRequest(method: "GET", target: "/generate-authentication-options"))
        let challenge = try #require(options.body["challenge"]?.stringValue)
        let noCookie = await simple.handle(RelyingPartyHTTPRequest(
            method: "POST", target: "/verify-authentication", body: Self.malformedSignIn(challenge: challenge)))
        #expect(noCookie.status == 400)
        #expect(noCookie.body["error"]?.stringValue?.contains("no hybrid-sim-session cookie: the options response set one") == true,
                "\(noCookie.body.text)")
        // Refused before the challenge was taken: the post with the cookie gets to the verification.
        let setCookie = try #require(options.headers.first { $0.0 == "Set-Cookie" }?.1)
        let cookie = String(setCookie.split(separator: ";")[0])
        let withCookie = await simple.handle(RelyingPartyHTTPRequest(
            method: "POST", target: "/verify-authentication", headers: ["cookie": cookie], body: Self.malformedSignIn(challenge: challenge)))
        #expect(withCookie.status == 400)
        #expect(withCookie.body["error"]?.stringValue?.contains("already used") == false, "\(withCookie.body.text)")
        #expect(withCookie.body["error"]?.stringValue?.contains("cookie") == false, "\(withCookie.body.text)")
        let py = try service("py_webauthn", directory: directory)
        let missing = await py.handle(RelyingPartyHTTPRequest(
            method: "POST", target: "/verify-authentication", body: Array(#"{"username":"alice"}"#.utf8)))
        #expect(missing.status == 400)
        #expect(missing.body["error"]?.stringValue?.contains("credential is required") == true, "\(missing.body.text)")
    }

    @Test("a result posted to the other ceremony's endpoint is refused by name and leaves its challenge usable")
    func otherCeremonyKeepsChallenge() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let rp = try service("hanko", directory: directory)
        let options = await rp.handle(RelyingPartyHTTPRequest(method: "GET", target: "/registration_initialize"))
        let challenge = try #require(options.body["publicKey"]?["challenge"]?.stringValue)
        let body = Self.malformedSignIn(challenge: challenge)
        let misposted = await rp.handle(RelyingPartyHTTPRequest(method: "POST", target: "/authentication_finalize", body: body))
        #expect(misposted.status == 400, "\(misposted.body.text)")
        #expect(misposted.body["error"]?.stringValue?.contains("was issued for a registration") == true, "\(misposted.body.text)")
        let taken = await rp.takePending(try #require(Base64URL.decode(challenge)), registration: true)
        guard case .taken(let user, _, _) = taken else {
            Issue.record("the registration challenge was used up by the misposted sign-in: \(taken)")
            return
        }
        #expect(user?.name == "alice")
    }

    @Test("an account name that is not a JSON string is a 400, not the default account", arguments: ["42", "true", #"{"name":"zoe"}"#, #"["zoe"]"#])
    func nonStringUserName(value: String) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let rp = try service("py_webauthn", directory: directory)
        for path in ["/generate-registration-options", "/generate-authentication-options"] {
            let response = await rp.handle(
                RelyingPartyHTTPRequest(method: "POST", target: path, body: Array(#"{"username":\#(value)}"#.utf8)))
            #expect(response.status == 400, "\(path) \(value): \(response.body.text)")
            #expect(response.body["error"]?.stringValue?.contains("must be a JSON string") == true, "\(response.body.text)")
        }
        for body in [#"{"username": alice}"#, "notjson"] {
            let unreadable = await rp.handle(
                RelyingPartyHTTPRequest(method: "POST", target: "/generate-registration-options", body: Array(body.utf8)))
            #expect(unreadable.status == 400, "\(body): \(unreadable.body.text)")
            #expect(unreadable.body["error"]?.stringValue?.hasPrefix("the body is not JSON") == true, "\(unreadable.body.text)")
        }
        // The reader's rule and offset, not a generic list of rules.
        let repeated = await rp.handle(
            RelyingPartyHTTPRequest(
                method: "POST", target: "/generate-registration-options", body: Array(#"{"username":"a","username":"b"}"#.utf8)))
        #expect(repeated.body["error"]?.stringValue?.contains("\"username\"") == true, "\(repeated.body.text)")
        #expect(repeated.body["error"]?.stringValue?.contains("offset") == true, "\(repeated.body.text)")
        // A body of another JSON type where the template wants an object: not the default account.
        for body in ["[]", "42", #""alice""#] {
            let other = await rp.handle(
                RelyingPartyHTTPRequest(method: "POST", target: "/generate-registration-options", body: Array(body.utf8)))
            #expect(other.status == 400, "\(body): \(other.body.text)")
            #expect(other.body["error"]?.stringValue?.hasPrefix("the body must be a JSON object") == true, "\(other.body.text)")
        }
        // An empty name (a script's unset variable) registers no default account; for sign-in it is a
        // discoverable one, as desktop --rp-url sends it without --user.
        let empty = await rp.handle(
            RelyingPartyHTTPRequest(method: "POST", target: "/generate-registration-options", body: Array(#"{"username":""}"#.utf8)))
        #expect(empty.status == 400, "\(empty.body.text)")
        #expect(
            empty.body["error"]?.stringValue
                == "the account name is empty: give 1…1024 bytes of UTF-8, or leave it out (or null) for the default account",
            "\(empty.body.text)")
        let discoverable = await rp.handle(
            RelyingPartyHTTPRequest(method: "POST", target: "/generate-authentication-options", body: Array(#"{"username":""}"#.utf8)))
        #expect(discoverable.status == 200 && discoverable.body["allowCredentials"] == nil, "\(discoverable.body.text)")
        _ = await rp.takePending(try #require(discoverable.body["challenge"]?.stringValue.flatMap(Base64URL.decode)), registration: false)
        let null = await rp.handle(
            RelyingPartyHTTPRequest(method: "POST", target: "/generate-registration-options", body: Array(#"{"username":null}"#.utf8)))
        #expect(null.status == 200, "null means no name given: \(null.body.text)")
        #expect(await rp.pendingCount == 1)
    }

    @Test("an account name in the query that is not UTF-8 once percent-decoded (Latin-1 %EB) is a 400, not the default account; a UTF-8 one, and a long non-Latin one, is taken")
    func undecodableQueryName() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let rp = try service("hanko", directory: directory)
        for query in ["Zo%EB", "%FF", "Zo%C3%28"] {
            let response = await rp.handle(RelyingPartyHTTPRequest(method: "GET", target: "/registration_initialize?user_name=\(query)"))
            #expect(response.status == 400, "\(query): \(response.body.text)")
            #expect(
                response.body["error"]?.stringValue == "the account name (query parameter user_name) is not UTF-8 text once percent-decoded",
                "\(response.body.text)")
        }
        let name = "अनुराधा.श्रीनिवासन@उदाहरण.भारत"  // 84 bytes
        let encoded = try #require(name.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
        for (query, expected) in [("Zo%C3%AB", "Zoë"), (encoded, name)] {
            let response = await rp.handle(RelyingPartyHTTPRequest(method: "GET", target: "/registration_initialize?user_name=\(query)"))
            #expect(response.status == 200, "\(query): \(response.body.text)")
            #expect(response.body["publicKey"]?["user"]?["name"]?.stringValue == expected, "\(response.body.text)")
        }
    }

    @Test("pending challenges are capped (the oldest dropped) and expire after 5 minutes, without a scan per call")
    func pendingChallengesBounded() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let clock = Mutex<UInt64>(1_000_000)
        let rp = try service("hanko", directory: directory, now: { clock.withLock { $0 } })
        func issue() async throws -> String {
            let options = await rp.handle(RelyingPartyHTTPRequest(method: "GET", target: "/authentication_initialize"))
            return try #require(options.body["publicKey"]?["challenge"]?.stringValue)
        }
        let first = try await issue()
        for _ in 0..<RelyingPartyService.maximumPending { _ = try await issue() }
        #expect(await rp.pendingCount == RelyingPartyService.maximumPending)
        #expect(await rp.takePending(try #require(Base64URL.decode(first)), registration: false) == .unknown, "the oldest was dropped")

        let late = try await issue()
        clock.withLock { $0 += 301 }
        #expect(await rp.takePending(try #require(Base64URL.decode(late)), registration: false) == .spent(.expired))
        let fresh = try await issue()
        #expect(await rp.pendingCount == 1, "every earlier challenge expired")
        guard case .taken = await rp.takePending(try #require(Base64URL.decode(fresh)), registration: false) else {
            Issue.record("the fresh challenge is not pending")
            return
        }
        // Expired ones dropped by the sweep are remembered as expired too (the last 1,024 of them).
        let sweptText = try await issue()
        let swept = try #require(Base64URL.decode(sweptText))
        clock.withLock { $0 += 301 }
        _ = try await issue()
        #expect(await rp.takePending(swept, registration: false) == .spent(.expired))
        // The wall clock steps back: nothing underflows (it trapped), and a challenge is still fresh.
        let beforeStep = try await issue()
        clock.withLock { $0 -= 1_000 }
        _ = try await issue()
        guard case .taken = await rp.takePending(try #require(Base64URL.decode(beforeStep)), registration: false) else {
            Issue.record("a challenge issued before the clock stepped back is not pending")
            return
        }
    }

    @Test(
        "profile files: mistakes are named",
        arguments: [
            (#"{"name": "x", "summary": "", "registration": {"options": {"method": "PUT", "path": "/a"}, "verify": {"method": "POST", "path": "/b"}, "success": {"status": [200]}}}"#, "registration.options.method must be GET or POST"),
            (#"{"name": "x", "summary": "", "registration": {"options": {"method": "GET", "path": "a"}, "verify": {"method": "POST", "path": "/b"}, "success": {"status": [200]}}}"#, "must start with /"),
            (#"{"name": "x", "summary": "", "registration": {"options": {"method": "GET", "path": "/a?u={username}"}, "verify": {"method": "POST", "path": "/b"}, "success": {"status": [200]}}}"#, "unknown placeholder {username}"),
            (#"{"name": "x", "summary": ""}"#, "neither registration nor authentication"),
            (#"{"name": "x", "summary": "", "optionsShape": "wrapped", "registration": {"options": {"method": "GET", "path": "/a"}, "verify": {"method": "POST", "path": "/b"}, "success": {"status": [200]}}}"#, "optionsShape"),
            // The strict reader's rules, before any decoding.
            (#"{"name": "x", "name": "y", "summary": ""}"#, "not JSON: duplicate member \"name\""),
            (#"{"name": "x", "summary": "", "extras": "# + String(repeating: "[", count: 40) + String(repeating: "]", count: 40) + "}", "not JSON"),
        ])
    func profileMistakes(json: String, mention: String) throws {
        #expect {
            try RelyingPartyProfile.parse(Data(json.utf8), source: "p.json")
        } throws: { error in
            (error as? ProgramFailure)?.kind == .badInput && "\(error)".contains(mention)
        }
        #expect(throws: ProgramFailure.self) { try RelyingPartyProfile.load("no-such-profile") }
    }

    @Test(
        "a profile's enumeration member with a value it does not have lists the allowed values, exit 2 (not \"Cannot initialize … from invalid String value\")",
        arguments: [
            ("optionsShape", "weird", "bare, publicKey, options, forgeRock"),
            ("userIdEncoding", "hex", "base64url, utf8"),
        ])
    func profileEnumerationValues(member: String, value: String, allowed: String) {
        let json = #"{"name": "x", "summary": "", "\#(member)": "\#(value)", "registration": {"options": {"method": "GET", "path": "/a"}, "verify": {"method": "POST", "path": "/b"}, "success": {"status": [200]}}}"#
        #expect {
            try RelyingPartyProfile.parse(Data(json.utf8), source: "p.json")
        } throws: { error in
            let failure = error as? ProgramFailure
            return failure?.exitCode == 2
                && failure?.message == "p.json is not a relying-party profile: invalid value: \(member): \"\(value)\" is not one of \(allowed)"
        }
    }
}
