import CTAP2
import Foundation
import HybridCore
import HybridSim
import HybridSimTestSupport
import Testing

@Suite("WebAuthn L3 credential JSON (toJSON output and the independent check)")
struct WebAuthnResponseJSONTests {
    typealias Mutation = (name: String, expected: WebAuthnJSONError, apply: (inout [String: Any]) throws -> Void)

    static func expectation(_ challenge: [UInt8]) -> WebAuthnResponseVerifier.Expectation {
        .init(
            challenge: challenge, origin: CeremonyFixture.origin, rpId: CeremonyFixture.rpId,
            requireUserVerification: true)
    }

    /// A verified registration, printed as the desktop prints it.
    static func printedRegistration(
        _ attestation: SoftwareAuthenticator.Attestation, fixture: inout CeremonyFixture
    ) throws -> (registration: CeremonyFixture.Registration, json: RegistrationResponseJSON, text: String) {
        let registration = try fixture.register(attestation: attestation)
        _ = try CeremonyFixture.relyingParty().verifiedRegistration(
            response: registration.response, clientDataJSON: registration.clientDataJSON,
            expectedChallenge: registration.challenge, user: CeremonyFixture.user, now: CeremonyFixture.now)
        let json = try RegistrationResponseJSON(
            response: registration.response, clientDataJSON: registration.clientDataJSON)
        return (registration, json, json.jsonString())
    }

    @Test(
        "registration JSON: shape, sorted keys, round trip, independent verification",
        arguments: SoftwareAuthenticator.Attestation.allCases)
    func registration(attestation: SoftwareAuthenticator.Attestation) throws {
        var fixture = CeremonyFixture()
        let (registration, json, text) = try Self.printedRegistration(attestation, fixture: &fixture)

        #expect(text.hasPrefix(#"{"authenticatorAttachment":"cross-platform","clientExtensionResults":{},"id":""#))
        #expect(text.contains(#""publicKeyAlgorithm":-7,"transports":["hybrid","internal"]},"type":"public-key"}"#))
        #expect(!text.contains("\n") && !text.contains("="))
        #expect(json.id == Base64URL.encode(registration.passkey.credentialID))
        #expect(json.response.clientDataJSON.bytes == registration.clientDataJSON)
        #expect(try RegistrationResponseJSON.parse(Array(text.utf8)) == json)
        #expect(try RegistrationResponseJSON.parse(Array(json.jsonString(prettyPrinted: true).utf8)) == json)

        // The attestation object is canonical CBOR {"fmt", "attStmt", "authData"} in that order.
        let attestationObject = json.response.attestationObject.bytes
        #expect(CBOR.encode(try CBOR.decode(attestationObject)) == attestationObject)
        #expect(Array(attestationObject.prefix(5)) == [0xA3, 0x63] + Array("fmt".utf8))

        let verified = try WebAuthnResponseVerifier.verifyRegistration(
            json: Array(text.utf8), expecting: Self.expectation(registration.challenge))
        #expect(verified.credentialId == registration.passkey.credentialID)
        #expect(verified.publicKey == COSEKey(publicKey: try registration.passkey.signingKey().publicKey))
        #expect(verified.publicKeySPKI == json.response.publicKey?.bytes)
        #expect(verified.attestationFormat == attestation.format)
        #expect(verified.transports == ["hybrid", "internal"])
        #expect(verified.signCount == 0)

        // credProps output, when the options asked for it, still verifies.
        let withCredProps = try RegistrationResponseJSON(
            response: registration.response, clientDataJSON: registration.clientDataJSON,
            clientExtensionResults: ClientExtensionResultsJSON(credProps: .init(rk: true)))
        let credPropsText = withCredProps.jsonString()
        #expect(credPropsText.contains(#""clientExtensionResults":{"credProps":{"rk":true}}"#))
        _ = try WebAuthnResponseVerifier.verifyRegistration(
            json: Array(credPropsText.utf8), expecting: Self.expectation(registration.challenge))
    }

    @Test("authentication JSON: shape, round trip, independent verification with the registered key")
    func authentication() throws {
        var fixture = CeremonyFixture()
        let printed = try Self.printedRegistration(.packedSelf, fixture: &fixture)
        let key = try WebAuthnResponseVerifier.verifyRegistration(
            json: Array(printed.text.utf8), expecting: Self.expectation(printed.registration.challenge)
        ).publicKey

        let assertion = try fixture.authenticate()
        let json = try AuthenticationResponseJSON(
            response: assertion.response, clientDataJSON: assertion.clientDataJSON)
        let text = json.jsonString()
        #expect(text.hasPrefix(#"{"authenticatorAttachment":"cross-platform","clientExtensionResults":{},"id":""#))
        #expect(text.contains(#""userHandle":"\#(Base64URL.encode(CeremonyFixture.user.id))"},"type":"public-key"}"#))
        #expect(try AuthenticationResponseJSON.parse(Array(text.utf8)) == json)

        let verified = try WebAuthnResponseVerifier.verifyAuthentication(
            json: Array(text.utf8), publicKey: key, expecting: Self.expectation(assertion.challenge),
            credentialId: printed.registration.passkey.credentialID, userHandle: CeremonyFixture.user.id)
        #expect(verified.signCount == 1)
        #expect(verified.userHandle == CeremonyFixture.user.id)

        // Without a user handle (allow-list sign-in) the member is absent and the check still passes.
        let second = try fixture.authenticate(allowList: [printed.registration.passkey.credentialID])
        let secondText = try AuthenticationResponseJSON(
            response: second.response, clientDataJSON: second.clientDataJSON
        ).jsonString()
        #expect(!secondText.contains("userHandle"))
        let again = try WebAuthnResponseVerifier.verifyAuthentication(
            json: Array(secondText.utf8), publicKey: key, expecting: Self.expectation(second.challenge))
        #expect(again.signCount == 2 && again.userHandle == nil)
    }

    @Test(
        "tampering any field of registration JSON fails the independent check",
        arguments: SoftwareAuthenticator.Attestation.allCases)
    func tamperedRegistration(attestation: SoftwareAuthenticator.Attestation) throws {
        var fixture = CeremonyFixture()
        let printed = try Self.printedRegistration(attestation, fixture: &fixture)
        let expectation = Self.expectation(printed.registration.challenge)
        var mutations: [Mutation] =
            Self.clientDataMutations + Self.identityMutations + [
                (
                    "authenticatorData differs from attestationObject", WebAuthnJSONError(.authenticatorDataMismatch),
                    {
                        try Self.editBytes(&$0, "authenticatorData") { $0[40] ^= 1 }
                    }
                ),
                (
                    "publicKey flipped", WebAuthnJSONError(.credentialMismatch),
                    { try Self.editBytes(&$0, "publicKey") { $0[$0.count - 1] ^= 1 } }
                ),
                (
                    "publicKeyAlgorithm", WebAuthnJSONError(.credentialMismatch),
                    { try Self.editResponse(&$0) { $0["publicKeyAlgorithm"] = -8 } }
                ),
                ("publicKey missing", WebAuthnJSONError(.credentialMismatch), { try Self.editResponse(&$0) { $0["publicKey"] = nil } }),
                ("transports missing", WebAuthnJSONError(.missingMember), { try Self.editResponse(&$0) { $0["transports"] = nil } }),
                (
                    "attestationObject not CBOR", WebAuthnJSONError(.invalidAttestation),
                    {
                        try Self.editBytes(&$0, "attestationObject") { $0 = [0xFF] + $0 }
                    }
                ),
                (
                    "attestationObject with another fmt", WebAuthnJSONError(.invalidAttestation),
                    {
                        try Self.editBytes(&$0, "attestationObject") { $0 = try Self.replaceFmt($0, with: "tpm") }
                    }
                ),
                (
                    "rpIdHash in both copies", WebAuthnJSONError(.authenticatorDataMismatch),
                    {
                        try Self.editBytes(&$0, "attestationObject") { $0 = try Self.flipRpIdHash($0) }
                        try Self.editBytes(&$0, "authenticatorData") { $0[0] ^= 1 }
                    }
                ),
            ]
        if attestation == .packedSelf {
            mutations.append(
                (
                    "packed signature", WebAuthnJSONError(.invalidAttestation),
                    {
                        try Self.editBytes(&$0, "attestationObject") { $0 = try Self.flipPackedSignature($0) }
                    }
                ))
        }
        for mutation in mutations {
            let tampered = try Self.mutate(printed.text, mutation.apply)
            #expect(throws: mutation.expected, "\(mutation.name)") {
                try WebAuthnResponseVerifier.verifyRegistration(json: tampered, expecting: expectation)
            }
        }
    }

    @Test("tampering any field of authentication JSON fails the independent check")
    func tamperedAuthentication() throws {
        var fixture = CeremonyFixture()
        let printed = try Self.printedRegistration(.none, fixture: &fixture)
        let key = try WebAuthnResponseVerifier.verifyRegistration(
            json: Array(printed.text.utf8), expecting: Self.expectation(printed.registration.challenge)
        ).publicKey
        let assertion = try fixture.authenticate()
        let text = try AuthenticationResponseJSON(
            response: assertion.response, clientDataJSON: assertion.clientDataJSON
        ).jsonString()
        let expectation = Self.expectation(assertion.challenge)
        let credentialId = printed.registration.passkey.credentialID

        let mutations: [Mutation] =
            Self.clientDataMutations + Self.identityMutations + [
                (
                    "signature flipped", WebAuthnJSONError(.invalidSignature),
                    { try Self.editBytes(&$0, "signature") { $0[$0.count - 1] ^= 1 } }
                ),
                (
                    "signature not DER", WebAuthnJSONError(.invalidSignature),
                    { try Self.editBytes(&$0, "signature") { $0 = Array($0.dropFirst()) } }
                ),
                (
                    "signCount raised", WebAuthnJSONError(.invalidSignature),
                    { try Self.editBytes(&$0, "authenticatorData") { $0[36] &+= 1 } }
                ),
                (
                    "UV cleared", WebAuthnJSONError(.authenticatorDataMismatch),
                    { try Self.editBytes(&$0, "authenticatorData") { $0[32] &= ~0x04 } }
                ),
                (
                    "rpIdHash", WebAuthnJSONError(.authenticatorDataMismatch),
                    { try Self.editBytes(&$0, "authenticatorData") { $0[3] ^= 1 } }
                ),
                ("userHandle", WebAuthnJSONError(.credentialMismatch), { try Self.editBytes(&$0, "userHandle") { $0.append(0) } }),
                ("signature missing", WebAuthnJSONError(.missingMember), { try Self.editResponse(&$0) { $0["signature"] = nil } }),
            ]
        for mutation in mutations {
            let tampered = try Self.mutate(text, mutation.apply)
            #expect(throws: mutation.expected, "\(mutation.name)") {
                try WebAuthnResponseVerifier.verifyAuthentication(
                    json: tampered, publicKey: key, expecting: expectation, credentialId: credentialId,
                    userHandle: CeremonyFixture.user.id)
            }
        }
        // The untouched JSON passes with the same arguments, and fails with another key.
        _ = try WebAuthnResponseVerifier.verifyAuthentication(
            json: Array(text.utf8), publicKey: key, expecting: expectation, credentialId: credentialId,
            userHandle: CeremonyFixture.user.id)
        var other = CeremonyFixture(seed: "other")
        let otherKey = try other.registeredCredential().coseKey()
        #expect(throws: WebAuthnJSONError(.invalidSignature)) {
            try WebAuthnResponseVerifier.verifyAuthentication(
                json: Array(text.utf8), publicKey: otherKey, expecting: expectation)
        }
    }

    // MARK: - Mutations shared by both ceremonies

    static var clientDataMutations: [Mutation] {
        [
            (
                "challenge", WebAuthnJSONError(.clientDataMismatch),
                { try editClientData(&$0) { $0["challenge"] = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" } }
            ),
            ("origin", WebAuthnJSONError(.clientDataMismatch), { try editClientData(&$0) { $0["origin"] = "https://evil.example" } }),
            ("type", WebAuthnJSONError(.clientDataMismatch), { try editClientData(&$0) { $0["type"] = "payment.get" } }),
            ("crossOrigin", WebAuthnJSONError(.clientDataMismatch), { try editClientData(&$0) { $0["crossOrigin"] = true } }),
            (
                "clientDataJSON not JSON", WebAuthnJSONError(.clientDataMismatch),
                { try editBytes(&$0, "clientDataJSON") { $0 = Array("{".utf8) } }
            ),
        ]
    }

    static var identityMutations: [Mutation] {
        [
            ("rawId differs from id", WebAuthnJSONError(.credentialMismatch), { $0["rawId"] = "AAAA" }),
            (
                "id and rawId both changed", WebAuthnJSONError(.credentialMismatch),
                {
                    $0["rawId"] = "AAAA"; $0["id"] = "AAAA"
                }
            ),
            ("rawId padded", WebAuthnJSONError(.invalidBase64URL), { $0["rawId"] = (($0["rawId"] as? String) ?? "") + "=" }),
            ("type", WebAuthnJSONError(.invalidValue), { $0["type"] = "private-key" }),
            ("authenticatorAttachment", WebAuthnJSONError(.invalidValue), { $0["authenticatorAttachment"] = "platform" }),
            ("extra member", WebAuthnJSONError(.invalidValue), { $0["getClientExtensionResults"] = [:] as [String: Any] }),
            ("clientExtensionResults missing", WebAuthnJSONError(.missingMember), { $0["clientExtensionResults"] = nil }),
            ("extra response member", WebAuthnJSONError(.invalidValue), { try editResponse(&$0) { $0["attestation"] = "x" } }),
            ("response not an object", WebAuthnJSONError(.wrongType), { $0["response"] = "x" }),
        ]
    }

    // MARK: - JSON editing helpers

    static func mutate(_ text: String, _ apply: (inout [String: Any]) throws -> Void) throws -> [UInt8] {
        var object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        try apply(&object)
        return Array(try JSONSerialization.data(withJSONObject: object))
    }

    static func editResponse(_ object: inout [String: Any], _ edit: (inout [String: Any]) throws -> Void) throws {
        var response = try #require(object["response"] as? [String: Any])
        try edit(&response)
        object["response"] = response
    }

    static func editBytes(_ object: inout [String: Any], _ member: String, _ edit: (inout [UInt8]) throws -> Void)
        throws
    {
        try editResponse(&object) { response in
            let text = try #require(response[member] as? String)
            var bytes = try #require(Base64URL.decode(text))
            try edit(&bytes)
            response[member] = Base64URL.encode(bytes)
        }
    }

    static func editClientData(_ object: inout [String: Any], _ edit: (inout [String: Any]) -> Void) throws {
        try editBytes(&object, "clientDataJSON") { bytes in
            var clientData = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
            edit(&clientData)
            bytes = Array(try JSONSerialization.data(withJSONObject: clientData))
        }
    }

    static func replaceFmt(_ attestationObject: [UInt8], with fmt: String) throws -> [UInt8] {
        var map = try #require(try CBOR.decode(attestationObject).mapValue)
        map[.text("fmt")] = .text(fmt)
        return CBOR.encode(.map(map))
    }

    static func flipPackedSignature(_ attestationObject: [UInt8]) throws -> [UInt8] {
        var map = try #require(try CBOR.decode(attestationObject).mapValue)
        var statement = try #require(map[.text("attStmt")]?.mapValue)
        var sig = try #require(statement[.text("sig")]?.bytesValue)
        sig[sig.count - 1] ^= 1
        statement[.text("sig")] = .bytes(sig)
        map[.text("attStmt")] = .map(statement)
        return CBOR.encode(.map(map))
    }

    static func flipRpIdHash(_ attestationObject: [UInt8]) throws -> [UInt8] {
        var map = try #require(try CBOR.decode(attestationObject).mapValue)
        var authData = try #require(map[.text("authData")]?.bytesValue)
        authData[0] ^= 1
        map[.text("authData")] = .bytes(authData)
        return CBOR.encode(.map(map))
    }
}
