import CTAP2
import Crypto

/// Fresh credentials and the makeCredential pieces built from them, as a phone would.
struct TestCredential {
    let privateKey = P256.Signing.PrivateKey()
    let credentialId: [UInt8] = Array(0..<16).map { UInt8($0) &* 7 }
    let rpId = "example.com"

    var coseKey: COSEKey { COSEKey(publicKey: privateKey.publicKey) }

    /// Client data for registration and its hash.
    var clientData: CollectedClientData {
        CollectedClientData(type: .create, challenge: Array(repeating: 0x42, count: 32), origin: "https://example.com")
    }

    /// makeCredential authenticator data: UP | UV | BE | BS | AT, counter 0.
    func authData(extensions: [String: CBORValue]? = nil, aaguid: [UInt8] = Array(repeating: 0, count: 16)) throws -> AuthenticatorData {
        let attested = try AttestedCredentialData(
            aaguid: aaguid, credentialId: credentialId, credentialPublicKey: coseKey)
        return AuthenticatorData(
            rpId: rpId, flags: [.userPresent, .userVerified, .backupEligible, .backupState], signCount: 0,
            attestedCredentialData: attested, extensions: extensions)
    }
}
