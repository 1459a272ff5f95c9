import CTAP2
import HybridTestSupport
import Testing

/// WebAuthn client data JSON: serialization order and escaping, tolerant parsing.
@Suite("CollectedClientData")
struct CollectedClientDataTests {
    private func text(_ data: CollectedClientData) -> String { String(decoding: data.json, as: UTF8.self) }

    @Test("serializes type, challenge, origin, crossOrigin in that order without spaces")
    func order() {
        let data = CollectedClientData(type: .create, challenge: [0xFB, 0xFF], origin: "https://a.example")
        #expect(text(data) == #"{"type":"webauthn.create","challenge":"-_8","origin":"https://a.example","crossOrigin":false}"#)
        let framed = CollectedClientData(
            type: .get, challenge: [], origin: "https://a.example", crossOrigin: true, topOrigin: "https://top.example")
        #expect(text(framed) == #"{"type":"webauthn.get","challenge":"","origin":"https://a.example","crossOrigin":true,"topOrigin":"https://top.example"}"#)
    }

    @Test("CCDToString escapes only quote, backslash and control characters")
    func escaping() throws {
        let origin = "https://\"q\"\\/\u{01}\u{1F}\u{7F}é😀"
        let data = CollectedClientData(type: .get, challenge: [1], origin: origin)
        #expect(text(data).contains(#""origin":"https://\"q\"\\/\u0001\u001f"# + "\u{7F}é😀\""))
        #expect(try CollectedClientData(json: data.json) == data)
    }

    @Test("parsing tolerates member order, whitespace, unknown members and escapes")
    func tolerantParse() throws {
        let json = """
            { "origin" : "https:\\/\\/example.com", "other_keys_can_be_added_here": "do not compare clientDataJSON against a template",
              "challenge":"AAECAwQFBgcICQoLDA0ODw", "nested": {"a": [1, -2.5e3, null, true]},
              "type": "webauthn.\\u0067et" }
            """
        let data = try CollectedClientData(json: Array(json.utf8))
        #expect(data == CollectedClientData(type: .get, challenge: Array(0..<16), origin: "https://example.com"))
        // Re-serialized in canonical order; the hash of the received bytes differs from `hash`.
        #expect(data.json == (try CTAP2Case.named("transcript_client_data")).bytes)
        #expect(CollectedClientData.hash(ofJSON: Array(json.utf8)) != data.hash)
    }

    @Test("surrogate pairs decode; lone surrogates do not")
    func surrogates() throws {
        let pair = #"{"type":"webauthn.get","challenge":"AA","origin":"\ud83d\ude00"}"#
        #expect(try CollectedClientData(json: Array(pair.utf8)).origin == "😀")
        for bad in [#"\ud83d"#, #"\ude00"#, #"\ud83d\u0041"#] {
            let json = #"{"type":"webauthn.get","challenge":"AA","origin":""# + bad + #""}"#
            #expect(throws: CTAP2Error(.invalidJSON), "\(bad)") { try CollectedClientData(json: Array(json.utf8)) }
        }
    }

    @Test("malformed JSON is invalidJSON", arguments: [
        "", " ", "{", "{}x", #"{"a":}"#, #"{"a" 1}"#, #"{"a":1,}"#, "[1,]", #"{"a":01}"#, #"{"a":1.}"#, #"{"a":-}"#,
        #"{"a":tru}"#, #"{"a":"\x"}"#, "{\"a\":\"\u{01}\"}", #"{'a':1}"#, "nul", #"{"a":"\u12"}"#,
    ])
    func malformed(_ json: String) {
        #expect(throws: CTAP2Error(.invalidJSON)) { try CollectedClientData(json: Array(json.utf8)) }
    }

    @Test("nesting deeper than 16 is rejected without recursion trouble")
    func depth() {
        let deep = #"{"type":"webauthn.get","challenge":"AA","origin":"o","x":"# + String(repeating: "[", count: 100_000)
        #expect(throws: CTAP2Error(.invalidJSON)) { try CollectedClientData(json: Array(deep.utf8)) }
    }

    @Test("wrong member types")
    func wrongTypes() {
        for json in [
            #"{"type":1,"challenge":"AA","origin":"o"}"#, #"{"type":"t","challenge":[],"origin":"o"}"#,
            #"{"type":"t","challenge":"AA","origin":null}"#, #"{"type":"t","challenge":"AA","origin":"o","topOrigin":true}"#,
        ] {
            #expect(throws: CTAP2Error(.wrongType), "\(json)") { try CollectedClientData(json: Array(json.utf8)) }
        }
    }

    @Test("challenge must be unpadded canonical base64url")
    func challenge() {
        for challenge in ["AA==", "A", "AB", "+/8", "a b"] {
            let json = #"{"type":"webauthn.get","challenge":""# + challenge + #"","origin":"o"}"#
            #expect(throws: CTAP2Error(.invalidValue), "\(challenge)") { try CollectedClientData(json: Array(json.utf8)) }
        }
    }
}
