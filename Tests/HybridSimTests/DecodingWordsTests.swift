import CTAP2
@testable import HybridSim
import Testing

/// The one wording of decoding failures that options documents, the stores and the phone's link
/// store share.
@Suite("Decoding failures in words")
struct DecodingWordsTests {
    private struct Member: CodingKey {
        let stringValue: String
        var intValue: Int?
        init(_ name: String) { (stringValue, intValue) = (name, nil) }
        init(_ index: Int) { (stringValue, intValue) = ("Index \(index)", index) }
        init?(stringValue: String) { self.init(stringValue) }
        init?(intValue: Int) { self.init(intValue) }
    }

    @Test("paths read as members and indices; kinds as JSON names them")
    func words() {
        #expect(DecodingWords.path([Member("allowCredentials"), Member(0), Member("id")]) == "allowCredentials[0].id")
        #expect(DecodingWords.path([]) == "")
        #expect(WebAuthnJSONCoding.path([]) == "the document")
        #expect(DecodingWords.kind(String.self) == "a string")
        #expect(DecodingWords.kind(Base64URLBytes.self) == "a string")
        #expect(DecodingWords.kind(Bool.self) == "a boolean")
        #expect(DecodingWords.kind(Int.self) == "a whole number")
        #expect(DecodingWords.kind(UInt32.self) == "a whole number")
        #expect(DecodingWords.kind(Double.self) == "a number")
        #expect(DecodingWords.kind([String].self) == "an array")
        #expect(DecodingWords.kind([String: Int].self) == "an object")
    }

    @Test("an options member of the wrong kind names it: timeout must be a whole number")
    func optionsWording() {
        #expect {
            try PublicKeyCredentialRequestOptionsJSON.parse(document: Array(#"{"challenge": "AQID", "timeout": "soon"}"#.utf8))
        } throws: { error in
            "\(error)".contains("timeout must be a whole number")
        }
    }
}
