import CTAP2
import Crypto
@testable import HybridInspect
import Testing

/// The terminal diagram's arrows and the annotated CBOR under them.
@Suite struct DiagramTextTests {
    @Test("a title too long for its arrow is shortened, and the byte count is kept")
    func longTitleKeepsItsSize() {
        let label = SequenceDiagram.arrowLabel("CTAP response: CTAP2_ERR_OPERATION_DENIED (0x27)", bytes: 48)
        #expect(label.hasSuffix("… (48 B) ") && label.count + 4 <= SequenceDiagram.lane, "\(label)")
        let arrow = SequenceDiagram.arrow(label: label, rightwards: false)
        #expect(arrow.contains("(48 B)") && arrow.count == SequenceDiagram.lane, "\(arrow)")
        #expect(SequenceDiagram.arrowLabel("shutdown", bytes: 48) == " shutdown (48 B) ", "a short title as it is")
    }

    @Test("a registration's authData with the AT flag: AAGUID, credential ID and COSE key, parsed by CTAP2's AuthenticatorData")
    func attestedCredentialData() throws {
        let key = try COSEKey(x963Representation: Array(P256.Signing.PrivateKey().publicKey.x963Representation))
        let attested = try AttestedCredentialData(
            aaguid: [UInt8](repeating: 0xAA, count: 16), credentialId: [1, 2, 3, 4], credentialPublicKey: key)
        let authData = AuthenticatorData(rpId: "example.com", flags: [.userPresent], signCount: 0, attestedCredentialData: attested)
        let lines = CBORAnnotation.lines([1: "none", 2: .bytes(authData.bytes), 3: [:]], schema: .makeCredentialResponse)
        let at = try #require(lines.firstIndex { $0.hasPrefix("2 (authData): ") })
        #expect(lines[at].contains("flags 0x41 [UP, AT], signCount 0"), "\(lines)")
        try #require(lines.count == at + 5, "authData, its three lines, attStmt: \(lines)")
        #expect(lines[at + 1] == "  aaguid: h'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'", "\(lines)")
        #expect(lines[at + 2] == "  credentialId: h'01020304' (4 bytes)", "\(lines)")
        #expect(lines[at + 3].hasPrefix("  credentialPublicKey (COSE_Key): {1: 2, 3: -7, -1: 1, -2: h'"), "\(lines)")
        #expect(lines[at + 4] == "3 (attStmt): {}", "\(lines)")
    }
}
