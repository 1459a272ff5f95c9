import CTAP2
import Foundation
import HybridCore
import Testing

/// The linked phone's listen token: the contact ID desktops hold is its SHA-256.
@Suite("Listen token")
struct ListenTokenTests {
    @Test("the contact ID is SHA-256 of the token (known answer: 32 zero bytes)")
    func contactIDIsTheHash() throws {
        let token = try #require(ListenToken(bytes: [UInt8](repeating: 0, count: 32)))
        #expect(Hex.encode(token.contactID) == "66687aadf862bd776c8fc18b8e9f8e20089714856ee233b3902a591d0d5f2925")
        let other = try #require(ListenToken(bytes: [1] + [UInt8](repeating: 0, count: 31)))
        #expect(other.contactID != token.contactID)
    }

    @Test("exactly 32 bytes, spelled as canonical unpadded base64url (43 characters)")
    func strictSpelling() throws {
        #expect(ListenToken(bytes: [UInt8](repeating: 7, count: 31)) == nil)
        #expect(ListenToken(bytes: [UInt8](repeating: 7, count: 33)) == nil)
        let token = ListenToken(random: .system)
        #expect(token.base64URL.count == ListenToken.encodedLength && ListenToken.encodedLength == 43)
        #expect(ListenToken(base64URL: token.base64URL) == token)
        for bad in [token.base64URL + "=", String(token.base64URL.dropLast()), token.base64URL.replacingOccurrences(of: "-", with: "+"), ""] {
            if bad != token.base64URL { #expect(ListenToken(base64URL: bad) == nil, "\(bad)") }
        }
        // The last character carries 4 spare bits: a non-zero spare bit is a second spelling.
        let zeros = Base64URL.encode([UInt8](repeating: 0, count: 32))
        #expect(zeros.hasSuffix("A"))
        #expect(ListenToken(base64URL: zeros.dropLast() + "B") == nil)
    }

    @Test("printing a token shows a prefix of its contact ID, never the secret")
    func redactedDescription() throws {
        let token = try #require(ListenToken(bytes: [UInt8](repeating: 0, count: 32)))
        #expect("\(token)" == "ListenToken(contact ID 66687aad…)")
        #expect(String(reflecting: token) == "\(token)")
        #expect(!"\(token)".contains(token.base64URL) && !"\([token])".contains(Hex.encode(token.bytes)))
    }
}
