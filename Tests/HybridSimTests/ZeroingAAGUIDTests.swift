import CTAP2
import Testing

@testable import HybridSim

/// `AuthenticatorData.zeroingAAGUID()`: what the desktop does to a phone's authenticator data for
/// attestation conveyance `none`, as a browser does.
@Suite("Attestation none: the AAGUID zeroed")
struct ZeroingAAGUIDTests {
    @Test("only the 16 AAGUID bytes change; a zero AAGUID, or no attested credential data, is left as it is")
    func zeroesOnlyTheAAGUID() throws {
        let aaguid: [UInt8] = Array(1...16)
        // A one-entry CBOR map ({1: 2}): any well-formed map is kept as the credential public key.
        let attested = try AttestedCredentialData(aaguid: aaguid, credentialId: [9, 8, 7], credentialPublicKeyBytes: [0xA1, 0x01, 0x02])
        let data = AuthenticatorData(
            rpId: "example.com", flags: [.userPresent, .userVerified], signCount: 5, attestedCredentialData: attested,
            extensions: ["credProtect": .unsigned(2)])
        let zeroed = try data.zeroingAAGUID()
        var expected = data.bytes
        expected.replaceSubrange(37..<53, with: [UInt8](repeating: 0, count: 16))
        #expect(zeroed.bytes == expected)
        #expect(try zeroed.zeroingAAGUID() == zeroed)
        let assertion = AuthenticatorData(rpId: "example.com", flags: [.userPresent], signCount: 1)
        #expect(try assertion.zeroingAAGUID() == assertion)
    }
}
