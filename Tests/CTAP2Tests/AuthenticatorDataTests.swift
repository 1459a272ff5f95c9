import CTAP2
import HybridTestSupport
import Testing

/// Authenticator data: parse and serialize, flags, attested credential data, extensions, strictness.
@Suite("AuthenticatorData")
struct AuthenticatorDataTests {
    @Test("makeCredential authData: attested credential data with a COSE key")
    func attested() throws {
        let vector = try CTAP2Case.named("makecredential_authenticator_data")
        let authData = try AuthenticatorData(bytes: vector.bytes)
        #expect(authData.rpIdHash == vector.bytes("rpIdHash"))
        #expect(authData.flags.rawValue == vector.bytes("flags")[0])
        #expect(authData.flags == [.userPresent, .userVerified, .attestedCredentialData])
        let attested = try #require(authData.attestedCredentialData)
        #expect(attested.aaguid == vector.bytes("aaguid"))
        #expect(attested.credentialId == vector.bytes("credentialId"))
        #expect(attested.credentialPublicKey == vector.bytes("credentialPublicKey"))
        #expect(try attested.coseKey().encode() == vector.bytes("credentialPublicKey"))
        #expect(authData.extensions == nil)
        #expect(authData.bytes == vector.bytes)
    }

    @Test("extensions map after the counter (ED)")
    func extensions() throws {
        let vector = try CTAP2Case.named("authenticator_data_with_extensions")
        let authData = try AuthenticatorData(bytes: vector.bytes)
        #expect(authData.flags == [.userPresent, .userVerified, .extensionData])
        #expect(authData.signCount == 7)
        #expect(authData.extensions == ["credProtect": 2])
        #expect(authData.bytes == vector.bytes)
    }

    @Test("both AT and ED, built and parsed")
    func attestedAndExtensions() throws {
        let credential = TestCredential()
        let authData = try credential.authData(extensions: ["credProtect": 3, "hmac-secret": true])
        #expect(authData.flags.contains([.attestedCredentialData, .extensionData, .backupEligible, .backupState]))
        let parsed = try AuthenticatorData(bytes: authData.bytes)
        #expect(parsed == authData)
        #expect(parsed.bytes == authData.bytes)
    }

    @Test("the sign counter is big-endian")
    func signCountEndianness() throws {
        let authData = AuthenticatorData(rpId: "a", flags: .userPresent, signCount: 0x0102_0304)
        #expect(Array(authData.bytes[33..<37]) == [1, 2, 3, 4])
        #expect(try AuthenticatorData(bytes: authData.bytes).signCount == 0x0102_0304)
    }

    @Test("AT and ED follow the data given, whatever the flags passed")
    func flagsNormalized() throws {
        let authData = AuthenticatorData(
            rpId: "example.com", flags: [.userPresent, .attestedCredentialData, .extensionData], signCount: 0)
        #expect(authData.flags == .userPresent)
        #expect(throws: CTAP2Error(.invalidLength)) {
            try AuthenticatorData(rpIdHash: [1, 2, 3], flags: [], signCount: 0)
        }
    }

    @Test("reserved flag bits are kept")
    func reservedBits() throws {
        var bytes = AuthenticatorData(rpId: "x", flags: .userPresent, signCount: 0).bytes
        bytes[32] = 0x23
        let parsed = try AuthenticatorData(bytes: bytes)
        #expect(parsed.flags.rawValue == 0x23)
        #expect(parsed.bytes == bytes)
        #expect(parsed.flags.description == "[UP, RFU 0x22]")
    }

    @Test("every truncation of makeCredential authData is rejected")
    func truncations() throws {
        let bytes = try CTAP2Case.named("makecredential_authenticator_data").bytes
        for length in 0..<bytes.count {
            do {
                _ = try AuthenticatorData(bytes: bytes.prefix(length))
                Issue.record("accepted \(length) bytes")
            } catch {
                #expect([.invalidLength, .inconsistentFlags, .invalidCBOR].contains(error.code), "\(length): \(error)")
            }
        }
    }

    @Test("attested credential data limits")
    func attestedLimits() throws {
        let key = TestCredential().coseKey
        #expect(throws: CTAP2Error(.invalidLength)) {
            try AttestedCredentialData(aaguid: [0], credentialId: [1], credentialPublicKey: key)
        }
        #expect(throws: CTAP2Error(.invalidLength)) {
            try AttestedCredentialData(
                aaguid: Array(repeating: 0, count: 16), credentialId: Array(repeating: 0, count: 1024),
                credentialPublicKey: key)
        }
        _ = try AttestedCredentialData(
            aaguid: Array(repeating: 0, count: 16), credentialId: Array(repeating: 0, count: 1023), credentialPublicKey: key)
        #expect(throws: CTAP2Error(.trailingBytes)) {
            try AttestedCredentialData(
                aaguid: Array(repeating: 0, count: 16), credentialId: [1], credentialPublicKeyBytes: key.encode() + [0])
        }
        #expect(throws: CTAP2Error(.wrongType)) {
            try AttestedCredentialData(aaguid: Array(repeating: 0, count: 16), credentialId: [1], credentialPublicKeyBytes: [0x80])
        }
    }

    @Test("a non-canonical COSE key inside authData is kept byte for byte")
    func nonCanonicalKeyKept() throws {
        let key = TestCredential().coseKey
        // Same entries, written in the order -3, -2, -1, 3, 1 (not CTAP2 canonical).
        let reordered: [UInt8] = [0xA5, 0x22, 0x58, 0x20] + key.y + [0x21, 0x58, 0x20] + key.x + [0x20, 0x01, 0x03, 0x26, 0x01, 0x02]
        let attested = try AttestedCredentialData(
            aaguid: Array(repeating: 0, count: 16), credentialId: [1], credentialPublicKeyBytes: reordered)
        let authData = AuthenticatorData(rpId: "example.com", flags: .userPresent, signCount: 0, attestedCredentialData: attested)
        let parsed = try AuthenticatorData(bytes: authData.bytes)
        #expect(parsed.attestedCredentialData?.credentialPublicKey == reordered)
        #expect(try parsed.attestedCredentialData?.coseKey() == key)
        #expect(parsed.bytes == authData.bytes)
    }
}
