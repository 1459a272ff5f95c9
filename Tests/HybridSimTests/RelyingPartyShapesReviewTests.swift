import CTAP2
import Foundation
@testable import HybridSim
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What a relying-party developer's own server found (a review with a hand-written Python relying
/// party): options a browser reads one way that HybridSim read another, and cookies and URLs a
/// browser treats differently.
@Suite("Relying party: options and HTTP as a browser treats them")
struct RelyingPartyShapesReviewTests {
    static func creation(_ extra: String) throws -> PublicKeyCredentialCreationOptionsJSON {
        try PublicKeyCredentialCreationOptionsJSON.parse(Array("""
            {"rp": {"id": "example.com", "name": "Example"}, "user": {"id": "AQID", "name": "a", "displayName": "A"},
             "challenge": "AAECAwQFBgcICQoLDA0ODw", "pubKeyCredParams": [{"type": "public-key", "alg": -7}]\(extra)}
            """.utf8))
    }

    static func request(_ extra: String) throws -> PublicKeyCredentialRequestOptionsJSON {
        try PublicKeyCredentialRequestOptionsJSON.parse(Array("""
            {"challenge": "AAECAwQFBgcICQoLDA0ODw", "rpId": "example.com"\(extra)}
            """.utf8))
    }

    @Test("an unknown attestation value counts as none (WebAuthn L3 §5.4), as an absent one does")
    func attestation() throws {
        #expect(try Self.creation(#", "attestation": "bogus""#).effectiveAttestation == "none")
        #expect(try Self.creation("").effectiveAttestation == "none")
        #expect(try Self.creation(#", "attestation": "direct""#).effectiveAttestation == "direct")
    }

    @Test("residentKey absent or unknown: discouraged unless requireResidentKey (L3 §5.4.4), so the CTAP2 request asks no rk and credProps says so", arguments: [
        (#""#, false), (#", "authenticatorSelection": {}"#, false),
        (#", "authenticatorSelection": {"residentKey": "bogus"}"#, false),
        (#", "authenticatorSelection": {"requireResidentKey": true}"#, true),
        (#", "authenticatorSelection": {"residentKey": "bogus", "requireResidentKey": true}"#, true),
        (#", "authenticatorSelection": {"residentKey": "preferred"}"#, true),
        (#", "authenticatorSelection": {"residentKey": "discouraged", "requireResidentKey": true}"#, false),
    ])
    func residentKey(extra: String, rk: Bool) throws {
        let options = try Self.creation(extra + #", "extensions": {"credProps": true}"#)
        let request = options.makeCredentialRequest(clientDataHash: Array(repeating: 0, count: 32), rpId: "example.com")
        #expect(request.options?.rk == (rk ? true : nil), "\(extra): rk is sent only when true, as Chromium sends it")
        #expect(options.clientExtensionResults.credProps?.rk == rk)
    }

    @Test("descriptors go to the phone without their transports, and parameters of other types are dropped, as Chromium's AsCBOR and converter do")
    func descriptorsAndParameters() throws {
        let creation = try Self.creation(#"""
            , "excludeCredentials": [{"type": "public-key", "id": "AQI", "transports": ["hybrid", "internal"]}],
              "pubKeyCredParams": [{"type": "foo", "alg": -7}, {"type": "public-key", "alg": -7}]
            """#)
        let made = creation.makeCredentialRequest(clientDataHash: Array(repeating: 0, count: 32), rpId: "example.com")
        #expect(made.excludeList?.map(\.transports) == [nil])
        #expect(made.pubKeyCredParams.map(\.type) == ["public-key"])
        let request = try Self.request(#", "allowCredentials": [{"type": "public-key", "id": "AQI", "transports": ["hybrid"]}]"#)
        let get = request.getAssertionRequest(clientDataHash: Array(repeating: 0, count: 32), rpId: "example.com")
        #expect(get.allowList?.map(\.transports) == [nil])
    }

    @Test("an allow list whose every entry names transports without hybrid is refused (a browser offers no phone for it); an entry without transports, or with hybrid or cable, allows it")
    func allowListTransports() throws {
        let error = #expect(throws: WebAuthnJSONError.self) {
            try Self.request(#", "allowCredentials": [{"type": "public-key", "id": "AQI", "transports": ["usb"]}, {"type": "public-key", "id": "AwQ", "transports": ["nfc", "usb"]}]"#)
        }
        #expect(error?.description.contains(#"none is "hybrid" (only "nfc", "usb")"#) == true, "\(String(describing: error))")
        for fine in [
            #"[{"type": "public-key", "id": "AQI", "transports": ["usb"]}, {"type": "public-key", "id": "AwQ"}]"#,
            #"[{"type": "public-key", "id": "AQI", "transports": ["usb", "hybrid"]}]"#,
            #"[{"type": "public-key", "id": "AQI", "transports": ["cable"]}]"#,
            #"[{"type": "public-key", "id": "AQI", "transports": []}]"#,
            // Values a browser does not know are dropped: left with none, the entry allows all.
            #"[{"type": "public-key", "id": "AQI", "transports": ["smart-card", "Hybrid"]}]"#,
        ] {
            #expect(throws: Never.self) { try Self.request(#", "allowCredentials": "# + fine) }
        }
    }

    @Test("cookies as a browser keeps them: Max-Age=0 and a past Expires delete, Path limits, a Domain that does not cover the host drops the cookie")
    func cookieJar() throws {
        let begin = try #require(URLComponents(string: "http://rp.example:8080/s/base/reg/begin"))
        let finish = try #require(URLComponents(string: "http://rp.example:8080/s/base/reg/finish"))
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        var jar = CookieJar()
        jar.store("sid=1; Path=/; HttpOnly", from: begin, now: now)
        jar.store("dir=2", from: begin, now: now)  // default path /s/base/reg
        jar.store("other=3; Path=/other", from: begin, now: now)
        jar.store("foreign=4; Domain=other.example", from: begin, now: now)
        jar.store("parent=5; Domain=.example", from: begin, now: now)
        jar.store("gone=6; Max-Age=0", from: begin, now: now)
        jar.store("old=7; Expires=Wed, 21 Oct 2015 07:28:00 GMT", from: begin, now: now)
        jar.store("later=8; Max-Age=60", from: begin, now: now)
        #expect(jar.header(for: finish, now: now) == "dir=2; later=8; parent=5; sid=1")
        #expect(jar.header(for: finish, now: now.addingTimeInterval(61)) == "dir=2; parent=5; sid=1")
        jar.store("sid=x; Path=/; Max-Age=0", from: begin, now: now)
        #expect(jar.header(for: try #require(URLComponents(string: "http://rp.example:8080/other/x")), now: now) == "other=3")
        #expect(jar.header(for: try #require(URLComponents(string: "http://elsewhere.test/")), now: now) == nil)
        #expect(CookieJar.defaultPath("/s/base/reg/begin") == "/s/base/reg" && CookieJar.defaultPath("/begin") == "/")
        #expect(CookieJar.pathMatches("/s/base", "/s") && !CookieJar.pathMatches("/sx", "/s") && CookieJar.pathMatches("/s/", "/s/"))
    }

    @Test("an origin host is an IP address as the socket layer reads one: IPv4, IPv6 with or without brackets; a host name, or digits that are no address, is not")
    func ipAddressHosts() {
        for host in ["127.0.0.1", "10.1.2.3", "::1", "[::1]", "[fe80::1]"] { #expect(DesktopCeremony.isIPAddress(host), "\(host)") }
        for host in ["example.com", "localhost", "1.2.3.4.example", "256.1.1.1", ""] { #expect(!DesktopCeremony.isIPAddress(host), "\(host)") }
    }

    @Test("--rp-url's query goes after the profile's path; the path is not lost behind it")
    func urlQuery() throws {
        let profile = try RelyingPartyProfile.load("py_webauthn")
        let client = try RelyingPartyClient(baseURL: "http://127.0.0.1:1/s/base?tenant=x", profile: profile, environment: [:])
        var endpoint = try #require(profile.registration).options
        endpoint.path = "/reg/begin"
        #expect(try client.url(endpoint, values: [:]) == "http://127.0.0.1:1/s/base/reg/begin?tenant=x")
        endpoint.path = "/reg/begin?kind=a"
        #expect(try client.url(endpoint, values: [:]) == "http://127.0.0.1:1/s/base/reg/begin?kind=a&tenant=x")
        // A query that is already percent-encoded goes out as it came (not decoded, not encoded twice).
        let encoded = try RelyingPartyClient(
            baseURL: "http://127.0.0.1:1/s?t=a%20b&n=%C3%A9%26x", profile: profile, environment: [:])
        endpoint.path = "/reg/begin"
        #expect(try encoded.url(endpoint, values: [:]) == "http://127.0.0.1:1/s/reg/begin?t=a%20b&n=%C3%A9%26x")
    }

    @Test("Set-Cookie is answered with Cookie on the next call, unless the profile says \"cookies\": false")
    func cookiesFalseKeepsNone() async throws {
        for keep in [true, false] {
            var profile = try RelyingPartyProfile.load("simplewebauthn")
            profile.cookies = keep ? nil : false
            let requests = Mutex<[String]>([])
            let server = try RelyingPartyClientFailureTests.serving { fd, request in
                requests.withLock { $0.append(request) }
                let answer = "HTTP/1.1 200 OK\r\nSet-Cookie: session=abc; Path=/\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
                _ = Array(answer.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
            defer { server.stop() }
            let client = try RelyingPartyClient(baseURL: "http://127.0.0.1:\(server.port)", profile: profile, environment: [:])
            let ceremony = try profile.ceremony(registration: true)
            for _ in 0..<2 { _ = try await client.fetchOptions(ceremony, values: [:]) }
            let seen = requests.withLock { $0 }
            #expect(seen.count == 2)
            #expect(seen.first?.lowercased().contains("\r\ncookie:") == false, "\(seen)")
            #expect(seen.last?.contains("\r\nCookie: session=abc\r\n") == keep, "keep \(keep): \(seen)")
        }
    }
}
