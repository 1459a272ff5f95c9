import CTAP2
import Foundation
@testable import HybridSim
import Testing

/// Options documents as relying-party servers send them: bare, `{"publicKey": …}`, `{"options": …}`.
@Suite("WebAuthn options: the shapes relying-party servers send")
struct WebAuthnOptionsShapeTests {
    @Test("bare py_webauthn and SimpleWebAuthn options are recognised as bare")
    func bare() throws {
        for name in ["py_webauthn-registration-options.json", "simplewebauthn-registration-options.json"] {
            let parsed = try PublicKeyCredentialCreationOptionsJSON.parse(document: OptionsFixtures.bytes(name))
            #expect(parsed.shape == .bare, "\(name)")
            #expect(parsed.options == (try PublicKeyCredentialCreationOptionsJSON.parse(OptionsFixtures.bytes(name))))
        }
    }

    @Test("go-webauthn / Hanko {publicKey} creation options: the inner options, mediation reported as ignored")
    func publicKeyWrapper() throws {
        let parsed = try PublicKeyCredentialCreationOptionsJSON.parse(
            document: OptionsFixtures.bytes("hanko-registration-options.json"))
        #expect(parsed.shape == .publicKey)
        #expect(parsed.ignoredSiblings == ["mediation"])
        #expect(parsed.options.user.name == "carol")
        #expect(parsed.options.user.id.bytes == Base64URL.decode("mWSc3zKfQ9S1vkTxQ7Z0gA"))
        #expect(parsed.options.effectiveUserVerification == "required")

        let request = try PublicKeyCredentialRequestOptionsJSON.parse(
            document: OptionsFixtures.bytes("hanko-authentication-options.json"))
        #expect(request.shape == .publicKey)
        #expect(request.options.rpId == "example.com")
        #expect(request.options.challenge.bytes == Base64URL.decode("3HqJv2l6Kx2hS3yq1D7aVb0Rk6wq8s1ZP1n6L9mF0Tc"))
    }

    @Test("Okta {options} with a plain-string user.id: utf8 gives its UTF-8 bytes, base64url would give other bytes")
    func oktaOptionsWrapper() throws {
        let bytes = try OptionsFixtures.bytes("okta-registration-options.json")
        let parsed = try PublicKeyCredentialCreationOptionsJSON.parse(document: bytes, userIdEncoding: .utf8)
        #expect(parsed.shape == .options)
        #expect(parsed.options.user.id.bytes == Array("00u1x2y3z4AbCdEfG5h7".utf8))
        #expect(parsed.options.user.name == "dana@example.com")
        #expect(parsed.options.rp.id == nil)
        // The same text read as base64url decodes (it happens to be valid) to different bytes: the
        // encoding has to be said, it cannot be guessed.
        let misread = try PublicKeyCredentialCreationOptionsJSON.parse(document: bytes)
        #expect(misread.options.user.id.bytes != Array("00u1x2y3z4AbCdEfG5h7".utf8))
    }

    @Test("ForgeRock callbacks: the MetadataCallback data becomes options (standard-base64 challenge, userId text as the handle)")
    func forgeRockCallbacks() throws {
        let parsed = try PublicKeyCredentialCreationOptionsJSON.parse(
            document: OptionsFixtures.bytes("forgerock-registration-callbacks.json"))
        #expect(parsed.shape == .forgeRock)
        let options = parsed.options
        #expect(options.challenge.bytes == Array(Data(base64Encoded: "N8c2kC5m+Y8x0ZQy7Yd8Vq3GZ7ZbS6p2l0r0Yv/2hXc=")!))
        #expect(options.user.id.bytes == Array("ZjRkNWE3MjAtNTk0Yy00YjY3LWIzZTktM2RkMjdhNGQ5ZjQ0".utf8))
        #expect(options.user.name == "ivy" && options.user.displayName == "Ivy")
        #expect(options.rp.id == "example.com" && options.rp.name == "ForgeRock")
        #expect(options.pubKeyCredParams.map(\.alg) == [-257, -7])
        #expect(options.requiresResidentKey)
        #expect(options.timeout == 60_000)

        let signIn = Array(#"{"_action": "webauthn_authentication", "challenge": "AQID", "_relyingPartyId": "example.com", "userVerification": "required", "_allowCredentials": [{"type": "public-key", "id": [1, -1, 127, -128]}]}"#.utf8)
        let request = try PublicKeyCredentialRequestOptionsJSON.parse(document: signIn)
        #expect(request.shape == .forgeRock)
        #expect(request.options.allowCredentialIds == [[1, 255, 127, 128]])
        #expect(request.options.rpId == "example.com")
        #expect(request.options.effectiveUserVerification == "required")
        // A timeout written as a string of digits, as the metadata's other option members are, is
        // the number, not dropped (which left the 120 s default).
        let stringTimeout = Array(#"{"_action": "webauthn_authentication", "challenge": "AQID", "timeout": "45000"}"#.utf8)
        #expect(try PublicKeyCredentialRequestOptionsJSON.parse(document: stringTimeout).options.timeout == 45_000)
        // Text that is not digits ("nan", "soon") is no timeout: left out, not a refusal.
        for text in ["nan", "soon", "0x1p4", "-5"] {
            let odd = Array(#"{"_action": "webauthn_authentication", "challenge": "AQID", "timeout": "\#(text)"}"#.utf8)
            #expect(try PublicKeyCredentialRequestOptionsJSON.parse(document: odd).options.timeout == nil, "\(text)")
        }

        #expect(throws: WebAuthnJSONError(.missingChallenge)) {
            try PublicKeyCredentialRequestOptionsJSON.parse(document: Array(#"{"_action": "webauthn_authentication"}"#.utf8))
        }
        #expect(throws: WebAuthnJSONError(.wrongType)) {
            try PublicKeyCredentialRequestOptionsJSON.parse(
                document: Array(#"{"_action": "webauthn_authentication", "challenge": "AQID", "_allowCredentials": [{"id": "AQ"}]}"#.utf8))
        }
    }

    @Test("ForgeRock's webAuthnOutcome: the legacy string, wrapped as {authenticatorAttachment, legacyData} when the metadata says supportsJsonResponse")
    func forgeRockJSONResponse() throws {
        let callbacks = try OptionsFixtures.bytes("forgerock-registration-callbacks.json")
        #expect(try PublicKeyCredentialCreationOptionsJSON.parse(document: callbacks).forgeRockJSONResponse)
        for (data, says) in [(#""supportsJsonResponse": true"#, true), ("", false), (#""supportsJsonResponse": "true""#, false)] {
            let signIn = Array(#"{"_action": "webauthn_authentication", "challenge": "AQID"\#(data.isEmpty ? "" : ", " + data)}"#.utf8)
            #expect(try PublicKeyCredentialRequestOptionsJSON.parse(document: signIn).forgeRockJSONResponse == says, "\(data)")
        }
        // A wrapper that is not ForgeRock's never says it.
        #expect(try !PublicKeyCredentialRequestOptionsJSON.parse(document: Array(#"{"publicKey": {"challenge": "AQID"}, "supportsJsonResponse": true}"#.utf8)).forgeRockJSONResponse)
        let wrapped = ForgeRockMetadata.jsonOutcome(legacy: #"{"type":"webauthn.get"}::1,-2::3::id"#)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(wrapped.utf8)) as? [String: String])
        #expect(object == ["authenticatorAttachment": "cross-platform", "legacyData": #"{"type":"webauthn.get"}::1,-2::3::id"#])
    }

    @Test(
        "options documents are read strictly: a repeated member (a second rpId would be the one signed for), nesting past 32, invalid UTF-8, nothing at all",
        arguments: [
            (#"{"challenge": "AQID", "rpId": "my.example", "rpId": "evil.example"}"#, "duplicate member \"rpId\""),
            (#"{"challenge": "AQID", "x": "# + String(repeating: "[", count: 40) + String(repeating: "]", count: 40) + "}", "nesting deeper than 32"),
            ("{\"challenge\": \"AQID\", \"rpId\": \"caf\u{FF}\"}", "invalid UTF-8"),
            // A name cut inside an emoji's UTF-16 pair (JavaScript's slice), said as such.
            (#"{"challenge": "AQID", "rpId": "a\ud83db"}"#, "unpaired surrogate escape (\\uD83D without the low half of its pair)"),
            (#"{"challenge": "AQID", "rpId": "a\ud83d\u0041"}"#, "unpaired surrogate escape (\\uD83D without the low half of its pair)"),
            (" \n", "the document is empty"),
            (#"{"challenge": "AQID", "timeout": 1e400}"#, "a number beyond what a double holds"),
        ])
    func strictReading(json: String, mention: String) {
        // Built from bytes so that \u{FF} stays one invalid byte.
        var bytes = Array(json.utf8)
        if json.contains("caf\u{FF}") {
            bytes = Array(#"{"challenge": "AQID", "rpId": "caf"#.utf8) + [0xFF] + Array(#""}"#.utf8)
        }
        #expect {
            try PublicKeyCredentialRequestOptionsJSON.parse(document: bytes)
        } throws: { error in
            (error as? WebAuthnJSONError)?.code == .invalidJSON && "\(error)".contains(mention)
        }
    }

    @Test("a UTF-8 byte-order mark is dropped, as a browser's response.json() drops it; UTF-16 and UTF-32 are refused by name")
    func byteOrderMarks() throws {
        let text = #"{"challenge": "AQID", "rpId": "example.com"}"#
        let marked = try PublicKeyCredentialRequestOptionsJSON.parse(document: [0xEF, 0xBB, 0xBF] + Array(text.utf8))
        #expect(marked.options.rpId == "example.com")
        let registration = #"{"challenge": "AQID", "rp": {"id": "example.com", "name": "E"}, "user": {"id": "AQ", "name": "a", "displayName": "A"}, "pubKeyCredParams": [{"type": "public-key", "alg": -7}]}"#
        #expect(try PublicKeyCredentialCreationOptionsJSON.parse(document: [0xEF, 0xBB, 0xBF] + Array(registration.utf8)).options.rp.id == "example.com")
        #expect(WebAuthnOptionsDocument.registrationMembers([0xEF, 0xBB, 0xBF] + Array(registration.utf8)) == ["rp", "user", "pubKeyCredParams"])

        let littleEndian = text.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
        let bigEndian = text.utf16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
        let utf32 = text.unicodeScalars.flatMap { [UInt8($0.value & 0xFF), 0, 0, 0] }
        for (bytes, mention) in [
            ([0xFF, 0xFE] + littleEndian, "UTF-16 (it begins with the byte-order mark FFFE)"),
            ([0xFE, 0xFF] + bigEndian, "UTF-16 (it begins with the byte-order mark FEFF)"),
            (littleEndian, "UTF-16 or UTF-32 (it has NUL bytes where its text begins)"),
            ([0xFF, 0xFE, 0, 0] + utf32, "UTF-32 (it begins with a byte-order mark)"),
        ] {
            #expect {
                try PublicKeyCredentialRequestOptionsJSON.parse(document: bytes)
            } throws: { error in
                (error as? WebAuthnJSONError)?.code == .invalidJSON && "\(error)".contains(mention) && "\(error)".contains("not UTF-8")
            }
        }
        // Not taken for registration options either (JSONSerialization alone would read UTF-16).
        #expect(WebAuthnOptionsDocument.registrationMembers([0xFF, 0xFE] + registration.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }).isEmpty)
    }

    @Test("timeout is read as a browser reads an unsigned long (WebIDL: truncated, modulo 2^32, a string by its number): 45000.7 is 45000, -5 is 4294967291, \"60000\" is 60000; true is still refused; a number among the hints is its text")
    func timeoutAsBrowsersRead() throws {
        func timeout(_ value: String) throws -> Int? {
            try PublicKeyCredentialRequestOptionsJSON.parse(document: Array(#"{"challenge": "AQID", "timeout": \#(value)}"#.utf8))
                .options.timeout
        }
        #expect(try timeout("45000.7") == 45000)
        #expect(try timeout("60000") == 60000)
        #expect(try timeout("1e20") == 1_661_992_960)
        #expect(try timeout("-5") == 4_294_967_291)
        #expect(try timeout(#""60000""#) == 60000)
        #expect(try timeout(#"" 1500 ""#) == 1500)
        #expect(throws: WebAuthnJSONError.self) { try timeout(#""soon""#) }  // a browser's 0: named instead
        #expect(throws: WebAuthnJSONError.self) { try timeout("true") }
        let hinted = try PublicKeyCredentialRequestOptionsJSON.parse(
            document: Array(#"{"challenge": "AQID", "hints": [42, "hybrid"]}"#.utf8))
        #expect(hinted.options.hints == ["42", "hybrid"])
        let creation = Array(
            #"{"publicKey": {"rp": {}, "user": {"id": "AQ", "name": "a"}, "challenge": "AQID", "pubKeyCredParams": [], "timeout": 30000.5}}"#.utf8)
        #expect(try PublicKeyCredentialCreationOptionsJSON.parse(document: creation).options.timeout == 30000)
    }

    @Test("errors name the member with its path inside the wrapper")
    func errorPaths() throws {
        let wrongType = Array(#"{"publicKey": {"rp": {"id": "example.com"}, "user": {"id": "AQ", "name": 5}, "challenge": "AQID", "pubKeyCredParams": []}}"#.utf8)
        #expect {
            try PublicKeyCredentialCreationOptionsJSON.parse(document: wrongType)
        } throws: { error in
            (error as? WebAuthnJSONError)?.code == .wrongType && "\(error)".contains("publicKey.user.name must be a string")
        }
        let badWrapper = Array(#"{"options": "rp"}"#.utf8)
        #expect {
            try PublicKeyCredentialCreationOptionsJSON.parse(document: badWrapper)
        } throws: { error in
            (error as? WebAuthnJSONError)?.code == .wrongType && "\(error)".contains("options must be an object")
        }
        let missing = Array(#"{"publicKey": {"challenge": "AQID"}}"#.utf8)
        #expect {
            try PublicKeyCredentialCreationOptionsJSON.parse(document: missing)
        } throws: { error in
            (error as? WebAuthnJSONError)?.code == .missingMember && "\(error)".contains("publicKey.rp is required")
        }
        let numericUserId = Array(#"{"options": {"rp": {}, "user": {"id": 7, "name": "x"}, "challenge": "AQID", "pubKeyCredParams": []}}"#.utf8)
        #expect {
            try PublicKeyCredentialCreationOptionsJSON.parse(document: numericUserId, userIdEncoding: .utf8)
        } throws: { error in
            (error as? WebAuthnJSONError)?.code == .wrongType && "\(error)".contains("options.user.id must be a string")
        }
        #expect(throws: WebAuthnJSONError(.invalidJSON)) {
            try PublicKeyCredentialRequestOptionsJSON.parse(document: Array("[1]".utf8))
        }
        #expect(throws: WebAuthnJSONError(.missingChallenge)) {
            try PublicKeyCredentialRequestOptionsJSON.parse(document: Array(#"{"publicKey": {"rpId": "example.com"}}"#.utf8))
        }
    }

    @Test("an envelope that is not a known wrapper is refused with its member names (escaped, at most 10), not read as options missing rp")
    func unrecognisedEnvelope() throws {
        let options = #"{"challenge": "AQID", "rpId": "example.com"}"#
        let names = (1...11).map { "m\($0)" }.map { #""\#($0)": 0"# }.joined(separator: ", ")
        for (json, members) in [
            (#"{"status": "ok", "data": \#(options)}"#, #"its top-level members are "data", "status""#),
            (#"{"a\u001b[2J": \#(options)}"#, #"its top-level members are "a\u{1B}[2J""#),
            ("{\(names)}", #"its top-level members are "m1", "m10", "m11", "m2", "m3", "m4", "m5", "m6", "m7", "m8", and 1 more"#),
            ("{}", "it has no members"),
        ] {
            #expect {
                try PublicKeyCredentialRequestOptionsJSON.parse(document: Array(json.utf8))
            } throws: { error in
                (error as? WebAuthnJSONError)?.code == .unrecognisedDocument
                    && "\(error)".hasPrefix("not WebAuthn options: the document is neither bare options")
                    && "\(error)".hasSuffix(members)
            }
        }
        // One options member is enough to be read as (bad) bare options: decoding names what is missing.
        #expect(throws: WebAuthnJSONError(.missingMember)) {
            try PublicKeyCredentialCreationOptionsJSON.parse(document: Array(#"{"rp": {}, "data": {}}"#.utf8))
        }
    }

    @Test("unknown members are ignored at every level, as browsers do")
    func unknownMembers() throws {
        let json = Array(#"{"publicKey": {"challenge": "AQID", "rpId": "example.com", "futureMember": {"x": 1}}, "signal": {}, "mediation": "silent"}"#.utf8)
        let parsed = try PublicKeyCredentialRequestOptionsJSON.parse(document: json)
        #expect(parsed.options.challenge.bytes == [1, 2, 3])
        #expect(parsed.ignoredSiblings == ["mediation", "signal"])
    }
}
