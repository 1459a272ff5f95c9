import CTAP2
import Foundation
import HybridCore
import HybridSim
import Testing

@Suite("WebAuthn L3 options JSON")
struct WebAuthnOptionsJSONTests {
    @Test("py_webauthn registration options parse and map to CTAP2")
    func pyWebAuthnRegistration() throws {
        let options = try PublicKeyCredentialCreationOptionsJSON.parse(
            OptionsFixtures.bytes("py_webauthn-registration-options.json"))
        #expect(options.rp.id == "example.com" && options.rp.name == "Example Co")
        #expect(options.user.name == "alice@example.com" && options.user.displayName == "Alice")
        #expect(options.user.id.bytes.count == 64)
        #expect(options.challenge.bytes.count == 64)
        #expect(options.pubKeyCredParams.map(\.alg) == [-7, -8, -36, -37, -38, -39, -257, -258, -259])
        #expect(options.timeout == 60_000)
        #expect(options.attestation == "none")
        #expect(options.excludeCredentials?.first?.id.bytes.count == 16)
        #expect(options.excludeCredentials?.first?.transports == ["internal", "hybrid"])
        #expect(options.effectiveUserVerification == "required")
        #expect(options.requiresResidentKey)

        let hash = [UInt8](repeating: 0xAB, count: 32)
        let request = options.makeCredentialRequest(
            clientDataHash: hash, rpId: options.effectiveRpId(origin: "https://example.com"))
        #expect(request.rp.id == "example.com" && request.rp.name == "Example Co")
        #expect(request.user.id == options.user.id.bytes)
        #expect(request.pubKeyCredParams.first?.alg == .es256)
        #expect(request.excludeList?.count == 1)
        #expect(request.options == AuthenticatorOptions(rk: true, uv: true))

        let rp = options.relyingParty(origin: "https://example.com")
        #expect(rp == RelyingParty(id: "example.com", origin: "https://example.com", requireUserVerification: true))
    }

    @Test("py_webauthn authentication options parse")
    func pyWebAuthnAuthentication() throws {
        let options = try PublicKeyCredentialRequestOptionsJSON.parse(
            OptionsFixtures.bytes("py_webauthn-authentication-options.json"))
        #expect(options.challenge.bytes.count == 64)
        #expect(options.rpId == "example.com")
        #expect(options.allowCredentialIds.map(\.count) == [16, 32])
        #expect(options.allowCredentials?.first?.transports == ["hybrid", "internal"])
        #expect(options.effectiveUserVerification == "required")
        let request = options.getAssertionRequest(clientDataHash: [UInt8](repeating: 1, count: 32), rpId: "example.com")
        #expect(request.allowList?.map(\.id) == options.allowCredentialIds)
        #expect(request.options?.uv == true)
        #expect(options.relyingParty(origin: "https://example.com").requireUserVerification)
    }

    @Test("SimpleWebAuthn registration options parse (extensions, hints, EdDSA first)")
    func simpleWebAuthnRegistration() throws {
        let options = try PublicKeyCredentialCreationOptionsJSON.parse(
            OptionsFixtures.bytes("simplewebauthn-registration-options.json"))
        #expect(options.challenge.bytes.count == 32)
        #expect(options.user.id.bytes.count == 32)
        #expect(options.pubKeyCredParams.map(\.alg) == [-8, -7, -257])
        #expect(options.offersES256)
        #expect(options.hints == ["hybrid"])
        #expect(options.authenticatorSelection?.authenticatorAttachment == "cross-platform")
        #expect(options.effectiveUserVerification == "preferred")
        #expect(!options.requiresResidentKey)
        let request = options.makeCredentialRequest(
            clientDataHash: [UInt8](repeating: 0, count: 32), rpId: "example.com")
        #expect(request.options == AuthenticatorOptions(rk: true, uv: true))
        #expect(!options.relyingParty(origin: "https://example.com").requireUserVerification)
        #expect(options.extensions?.credProps == true)
        #expect(options.clientExtensionResults.credProps?.rk == true)
    }

    @Test("SimpleWebAuthn authentication options parse (discoverable sign-in)")
    func simpleWebAuthnAuthentication() throws {
        let options = try PublicKeyCredentialRequestOptionsJSON.parse(
            OptionsFixtures.bytes("simplewebauthn-authentication-options.json"))
        #expect(options.challenge.bytes.count == 32)
        #expect(options.allowCredentials == nil && options.allowCredentialIds.isEmpty)
        let request = options.getAssertionRequest(clientDataHash: [UInt8](repeating: 0, count: 32), rpId: "example.com")
        #expect(request.allowList == nil)
    }

    @Test("clear errors for bad creation options")
    func creationErrors() {
        let user = #""user":{"id":"dXNlcg","name":"alice","displayName":"Alice"}"#
        let params = #""pubKeyCredParams":[{"type":"public-key","alg":-7}]"#
        let cases: [(String, WebAuthnJSONError, String)] = [
            (#"{"rp":{"id":"example.com"},\#(user),\#(params)}"#, WebAuthnJSONError(.missingChallenge), "challenge"),
            (#"{"rp":{},\#(user),"challenge":"",\#(params)}"#, WebAuthnJSONError(.missingChallenge), "empty"),
            (#"{"rp":{},\#(user),"challenge":null,\#(params)}"#, WebAuthnJSONError(.missingChallenge), "null"),
            (#"{"rp":{},\#(user),"challenge":"a+b/",\#(params)}"#, WebAuthnJSONError(.invalidBase64URL), "challenge"),
            (#"{"rp":{},"user":{"id":"a+b","name":"x"},"challenge":"AAAA",\#(params)}"#, WebAuthnJSONError(.invalidBase64URL), "user.id"),
            // Each reason in words: "AAB" has leftover bits; "AAAAA" a character over; "AA=A" an = inside.
            (#"{"rp":{},\#(user),"challenge":"AAB",\#(params)}"#, WebAuthnJSONError(.invalidBase64URL), "non-zero leftover bits"),
            (#"{"rp":{},\#(user),"challenge":"AB==",\#(params)}"#, WebAuthnJSONError(.invalidBase64URL), "non-zero leftover bits"),
            (#"{"rp":{},\#(user),"challenge":"AAAA====",\#(params)}"#, WebAuthnJSONError(.invalidBase64URL), "more than two ="),
            (#"{"rp":{},\#(user),"challenge":"AAA==",\#(params)}"#, WebAuthnJSONError(.invalidBase64URL), "multiple of four"),
            (#"{"rp":{},\#(user),"challenge":"AAAAA",\#(params)}"#, WebAuthnJSONError(.invalidBase64URL), "leaves one character over"),
            (#"{"rp":{},\#(user),"challenge":"AA=A",\#(params)}"#, WebAuthnJSONError(.invalidBase64URL), "= before its end"),
            (#"{"rp":{},\#(user),"challenge":"a+b/",\#(params)}"#, WebAuthnJSONError(.invalidBase64URL), "standard base64's + or /"),
            (
                #"{"rp":{},\#(user),"challenge":"AAAA","pubKeyCredParams":[{"type":"public-key","alg":-8}]}"#, WebAuthnJSONError(.noES256),
                "EdDSA"
            ),
            (
                #"{"rp":{},\#(user),"challenge":"AAAA","pubKeyCredParams":[{"type":"other","alg":-7}]}"#, WebAuthnJSONError(.noES256),
                #"pubKeyCredParams[0].type "other" is not "public-key", and a browser skips such entries (WebAuthn §5.1.3), so no public-key entry is left"#
            ),
            (
                #"{"rp":{},\#(user),"challenge":"AAAA","pubKeyCredParams":[{"type":"other","alg":-7},{"type":"x","alg":-7},{"type":"public-key","alg":-257}]}"#,
                WebAuthnJSONError(.noES256),
                #"pubKeyCredParams[0].type "other" is not "public-key" (nor are the types of 1 more), and a browser skips such entries (WebAuthn §5.1.3), so the public-key entries left offer [RS256 (-257)]"#
            ),
            (#"{"rp":{},\#(user),"challenge":"AAAA"}"#, WebAuthnJSONError(.missingMember), "pubKeyCredParams"),
            (#"{"rp":{},"user":{"id":"AAAA"},"challenge":"AAAA",\#(params)}"#, WebAuthnJSONError(.missingMember), "user.name"),
            (#"{"rp":{},\#(user),"challenge":"AAAA",\#(params),"timeout":"soon"}"#, WebAuthnJSONError(.wrongType), "timeout"),
            (
                #"{"rp":{},\#(user),"challenge":"AAAA",\#(params),"excludeCredentials":[{"id":"%%"}]}"#,
                WebAuthnJSONError(.invalidBase64URL),
                "excludeCredentials[0].id"
            ),
            (#"{"rp":{},"user":{"id":"","name":"x"},"challenge":"AAAA",\#(params)}"#, WebAuthnJSONError(.invalidValue), "user.id"),
            (#"[1,2]"#, WebAuthnJSONError(.invalidJSON), "object"),
            (#"{"rp":"#, WebAuthnJSONError(.invalidJSON), "end of file"),
            (#"{"rp":{},\#(user),"challenge":"AAAA",\#(params),"timeout":1e20}"#, WebAuthnJSONError(.invalidValue), "out of range"),
            (#"{"rp":{"id":"alice@example.com"},\#(user),"challenge":"AAAA",\#(params)}"#, WebAuthnJSONError(.invalidValue), #"it holds "@""#),
            (#"{"rp":{"id":"example.com/login"},\#(user),"challenge":"AAAA",\#(params)}"#, WebAuthnJSONError(.invalidValue), #"it holds "/""#),
            (#"{"rp":{"id":"example .com"},\#(user),"challenge":"AAAA",\#(params)}"#, WebAuthnJSONError(.invalidValue), "it holds a space"),
            (#"{"rp":{"id":"example.com\t"},\#(user),"challenge":"AAAA",\#(params)}"#, WebAuthnJSONError(.invalidValue), "it holds U+9"),
        ]
        for (json, expected, mention) in cases {
            do {
                _ = try PublicKeyCredentialCreationOptionsJSON.parse(Array(json.utf8))
                Issue.record("accepted: \(json)")
            } catch {
                #expect(error == expected, "\(json) → \(error)")
                #expect(error.description.contains(mention), "\(error.description) should mention \(mention)")
                #expect(!error.description.contains("\n"))
            }
        }
    }

    @Test("an RP ID a host may be written as passes the options' own check: a trailing dot, an underscore, upper case, an IDN")
    func rpIdHostForms() throws {
        for rpId in ["example.com.", "my_app.corp.example", "Example.COM", "bücher.example", "xn--bcher-kva.example", "localhost"] {
            let json = #"{"rp":{"id":"\#(rpId)"},"user":{"id":"dXNlcg","name":"alice"},"challenge":"AAAA","pubKeyCredParams":[]}"#
            #expect(throws: Never.self, "\(rpId)") { _ = try PublicKeyCredentialCreationOptionsJSON.parse(Array(json.utf8)) }
            let request = #"{"rpId":"\#(rpId)","challenge":"AAAA"}"#
            #expect(throws: Never.self, "\(rpId)") { _ = try PublicKeyCredentialRequestOptionsJSON.parse(Array(request.utf8)) }
        }
    }

    @Test("unknown members, any extensions and empty pubKeyCredParams are tolerated")
    func tolerance() throws {
        let json = #"""
            {"rp":{"id":"example.com","name":"Ex","icon":"x"},"user":{"id":"dXNlcg","name":"alice","displayName":"A"},
             "challenge":"Y2hhbGxlbmdlLWJ5dGVz","pubKeyCredParams":[],"extensions":{"prf":{"eval":{"first":"AAAA"}},"x":[1,2]},
             "attestationFormats":["packed"],"futureMember":{"nested":true},
             "authenticatorSelection":{"userVerification":"sometimes","residentKey":"discouraged"}}
            """#
        let options = try PublicKeyCredentialCreationOptionsJSON.parse(Array(json.utf8))
        #expect(options.effectivePubKeyCredParams.map(\.alg) == [-7, -257])
        #expect(options.extensions == ClientExtensionInputsJSON(credProps: nil))
        #expect(options.clientExtensionResults == ClientExtensionResultsJSON())
        #expect(options.effectiveUserVerification == "preferred")
        #expect(Base64URL.encode(options.challenge.bytes) == "Y2hhbGxlbmdlLWJ5dGVz")
        let request = options.makeCredentialRequest(
            clientDataHash: [UInt8](repeating: 0, count: 32), rpId: "example.com")
        #expect(request.options == AuthenticatorOptions(uv: true))  // rk left out when false, as Chromium sends it

        // Extensions of unexpected shapes are ignored, not rejected.
        for extensions in [#"[1]"#, #""x""#, #"{"credProps":"yes"}"#] {
            let odd = #"{"rp":{},"user":{"id":"AAAA","name":"a"},"challenge":"AAAA","pubKeyCredParams":[],"extensions":"#
                + extensions + "}"
            #expect(try PublicKeyCredentialCreationOptionsJSON.parse(Array(odd.utf8)).extensions?.credProps == nil)
        }

        // rp.id absent: the origin's host is the RP ID.
        let noId = #"{"rp":{"name":"Ex"},"user":{"id":"dXNlcg","name":"a"},"challenge":"AAAA","pubKeyCredParams":[]}"#
        let parsed = try PublicKeyCredentialCreationOptionsJSON.parse(Array(noId.utf8))
        #expect(parsed.effectiveRpId(origin: "https://login.example.org:8443") == "login.example.org")

        let request2 =
            #"{"challenge":"AAAA","allowCredentials":[{"id":"AQID"},{"id":"BAUG","type":"future"}],"extensions":{"a":1},"z":0}"#
        let requestOptions = try PublicKeyCredentialRequestOptionsJSON.parse(Array(request2.utf8))
        #expect(requestOptions.allowCredentialIds == [[1, 2, 3]])
        #expect(requestOptions.effectiveRpId(origin: "https://example.com") == "example.com")
    }

    @Test("clear errors for bad request options")
    func requestErrors() {
        let cases: [(String, WebAuthnJSONError)] = [
            (#"{"rpId":"example.com"}"#, WebAuthnJSONError(.missingChallenge)),
            (#"{"challenge":"AA*A"}"#, WebAuthnJSONError(.invalidBase64URL)),
            (#"{"challenge":"AAAA","allowCredentials":[{"type":"public-key"}]}"#, WebAuthnJSONError(.missingMember)),
            (#"{"challenge":"AAAA","allowCredentials":{"id":"AAAA"}}"#, WebAuthnJSONError(.wrongType)),
            (#"{"challenge":"AAAA","allowCredentials":[{"id":""}]}"#, WebAuthnJSONError(.invalidValue)),
            (#"{"challenge":"AAAA","rpId":""}"#, WebAuthnJSONError(.invalidValue)),
            (#"{"challenge":"AAAA","userVerification":7}"#, WebAuthnJSONError(.wrongType)),
            ("\u{FF}\u{FE}", WebAuthnJSONError(.invalidJSON)),
            // Every descriptor skipped (not public-key): not a discoverable sign-in.
            (#"{"challenge":"AAAA","allowCredentials":[{"type":"future","id":"AAAA"}]}"#, WebAuthnJSONError(.invalidValue)),
        ]
        for (json, expected) in cases {
            #expect(throws: expected, "\(json)") { try PublicKeyCredentialRequestOptionsJSON.parse(Array(json.utf8)) }
        }
    }

    @Test("options encode and parse back unchanged")
    func roundTrip() throws {
        let options = PublicKeyCredentialCreationOptionsJSON(
            rp: PublicKeyCredentialRpEntityJSON(id: "example.com", name: "Example"),
            user: PublicKeyCredentialUserEntityJSON(id: [1, 2, 3], name: "alice", displayName: "Alice"),
            challenge: Array(0..<32),
            authenticatorSelection: AuthenticatorSelectionCriteriaJSON(
                residentKey: "required", userVerification: "required"))
        let encoded = try JSONEncoder().encode(options)
        #expect(try PublicKeyCredentialCreationOptionsJSON.parse(Array(encoded)) == options)

        let request = PublicKeyCredentialRequestOptionsJSON(
            challenge: Array(0..<32), rpId: "example.com",
            allowCredentials: [PublicKeyCredentialDescriptorJSON(id: [9])])
        #expect(try PublicKeyCredentialRequestOptionsJSON.parse(Array(try JSONEncoder().encode(request))) == request)
    }
}
